"""One generic codec: each (API, version, direction) schema is compiled once into Python source.

The compiler walks the schema tree for one version and emits straight-line encode and decode
functions per struct (runs of fixed-width fields become a single `struct` pack/unpack, varint
lengths below 128 take an inline fast path), then `exec`s them. Calls after the first never look
at the schema again.

Decoding policy: every byte must be accounted for. Trailing bytes after the body, a tagged field
whose value does not fill exactly its declared size, invalid UTF-8, a null in a non-nullable
field, a length running past the end, or a count larger than the bytes left could hold are
errors: `MalformedRequestError` (INVALID_REQUEST) for requests, `MalformedResponseError`
(CORRUPT_MESSAGE) for responses. Unknown tagged fields are skipped, as Kafka does. A length is
checked against the bytes left before anything is allocated, so a count of 2**31 fails at once.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeAlias

from kraft.protocol.errors import (
    EncodeError,
    MalformedMessageError,
    MalformedRequestError,
    MalformedResponseError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from kraft.protocol.messages import APIS
from kraft.protocol.schema import (
    FIXED_FORMAT,
    ArrayOf,
    Direction,
    Field,
    FieldType,
    MessageSpec,
    Prim,
    Struct,
    default_of,
)
from kraft.protocol.values import FieldValue, Message, MessageDict
from kraft.protocol.wire import WireFormatError, make_uuid, read_uvarint, uvarint

Encoder: TypeAlias = Callable[[Message, list[bytes]], None]
Decoder: TypeAlias = Callable[[memoryview, int, int], tuple[MessageDict, int]]

_DECODE_FAULTS: Final = (
    WireFormatError,
    struct.error,
    IndexError,
    UnicodeDecodeError,
    ValueError,
    OverflowError,
)
_ENCODE_FAULTS: Final = (
    struct.error,
    TypeError,
    AttributeError,
    ValueError,
    OverflowError,
    UnicodeEncodeError,
)


class _EncodeRefusedError(Exception):
    """A value the schema forbids at this version; becomes EncodeError."""


def _fixed_size(p: Prim) -> int:
    return struct.calcsize(">" + FIXED_FORMAT[p])


def _min_size(t: FieldType, version: int, flexible: bool) -> int:
    """Fewest bytes a value of this type can occupy, to bound counts read off the wire."""
    if isinstance(t, Struct):
        total = 1 if flexible else 0  # the tagged-field count
        for f in t.fields:
            if version in f.versions and not f.is_tagged_in(version):
                total += _min_size(f.type, version, flexible)
        return total
    if isinstance(t, ArrayOf):
        return 1 if flexible else 4
    if t in FIXED_FORMAT:
        return _fixed_size(t)
    if t is Prim.STRING:
        return 1 if flexible else 2
    return 1 if flexible else 4


def _is_fixed(f: Field) -> bool:
    return isinstance(f.type, Prim) and f.type in FIXED_FORMAT


class _Compiler:
    """Emits the source of one (message, version) codec; one instance per compilation."""

    def __init__(self, spec: MessageSpec, version: int) -> None:
        self.spec = spec
        self.version = version
        self.flexible = version in spec.flexible
        self.ns: dict[str, object] = {
            "_Fault": WireFormatError,
            "_EncFault": _EncodeRefusedError,
            "_ruv": read_uvarint,
            "_uv": uvarint,
            "_mu": make_uuid,
            "_unpack_from": struct.unpack_from,
            "_pack": struct.pack,
            "_I16": struct.Struct(">h").unpack_from,
            "_I32": struct.Struct(">i").unpack_from,
            "_P16": struct.Struct(">h").pack,
            "_P32": struct.Struct(">i").pack,
        }
        self.src: list[str] = []
        self.ids = itertools.count()
        self.source = ""
        self.dec_names: dict[int, str] = {}
        self.enc_names: dict[int, str] = {}

    # -- shared helpers ------------------------------------------------------------------
    def const(self, value: object) -> str:
        name = f"_c{next(self.ids)}"
        self.ns[name] = value
        return name

    def fresh(self, value: FieldValue) -> str:
        """Source for an expression building a fresh copy of a default value."""
        if isinstance(value, dict):
            items = ", ".join(f"{k!r}: {self.fresh(v)}" for k, v in value.items())
            return "{" + items + "}"
        if isinstance(value, list):
            return "[" + ", ".join(self.fresh(v) for v in value) + "]"
        if value is None or isinstance(value, bool | int | float | str):
            return repr(value)
        return self.const(value)

    def present(self, s: Struct) -> tuple[list[Field], list[Field]]:
        v = self.version
        fields = [f for f in s.fields if v in f.versions]
        regular = [f for f in fields if not f.is_tagged_in(v)]
        tagged = sorted((f for f in fields if f.is_tagged_in(v)), key=lambda f: f.tag or 0)
        return regular, tagged

    def nullable(self, f: Field) -> bool:
        return self.version in f.nullable

    # -- decoding ------------------------------------------------------------------------
    def decoder(self, s: Struct) -> str:
        key = id(s)
        if key in self.dec_names:
            return self.dec_names[key]
        name = f"_d{next(self.ids)}_{s.name}"
        self.dec_names[key] = name
        regular, tagged = self.present(s)
        out = [f"def {name}(buf, pos, end):"]
        var = {f.name: f"v{i}" for i, f in enumerate(s.fields)}
        i = 0
        while i < len(regular):
            if _is_fixed(regular[i]):
                j = i
                while j < len(regular) and _is_fixed(regular[j]):
                    j += 1
                self.read_fixed_run(out, "    ", regular[i:j], var)
                i = j
            else:
                f = regular[i]
                self.read_value(out, "    ", f, t=f.type, target=var[f.name], end="end")
                i += 1
        if self.flexible:
            self.read_tagged(out, tagged, var)
        present = {f.name for f in regular} | {f.name for f in tagged}
        items = []
        for f in s.fields:
            expr = var[f.name] if f.name in present else self.fresh(default_of(f))
            items.append(f"{f.name!r}: {expr}")
        out.append("    return {" + ", ".join(items) + "}, pos")
        self.src.append("\n".join(out))
        return name

    def read_fixed_run(
        self, out: list[str], ind: str, run: list[Field], var: dict[str, str]
    ) -> None:
        fmt = ">" + "".join(FIXED_FORMAT[f.type] for f in run if isinstance(f.type, Prim))
        unpack = self.const(struct.Struct(fmt).unpack_from)
        targets = ", ".join(var[f.name] for f in run)
        out.append(f"{ind}{targets}, = {unpack}(buf, pos)")
        out.append(f"{ind}pos += {struct.calcsize(fmt)}")
        out.extend(f"{ind}{var[f.name]} = _mu({var[f.name]})" for f in run if f.type is Prim.UUID)

    def read_length(self, out: list[str], ind: str, compact: bool, wide: bool) -> None:
        """Leaves the signed length (-1 for null) in `n`."""
        if compact:
            out.append(f"{ind}n = buf[pos]")
            out.append(f"{ind}if n < 128:")
            out.append(f"{ind}    pos += 1")
            out.append(f"{ind}else:")
            out.append(f"{ind}    n, pos = _ruv(buf, pos)")
            out.append(f"{ind}n -= 1")
        else:
            out.append(f"{ind}n, = {'_I32' if wide else '_I16'}(buf, pos)")
            out.append(f"{ind}pos += {4 if wide else 2}")

    def read_null(self, out: list[str], ind: str, f: Field, target: str) -> None:
        out.append(f"{ind}if n < 0:")
        if not self.flexible:
            out.append(f"{ind}    if n != -1:")
            out.append(f"{ind}        raise _Fault('negative length in {f.name}')")
        if self.nullable(f):
            out.append(f"{ind}    {target} = None")
        else:
            out.append(f"{ind}    raise _Fault('null in non-nullable field {f.name}')")
        out.append(f"{ind}else:")

    def read_value(
        self, out: list[str], ind: str, f: Field, *, t: FieldType, target: str, end: str
    ) -> None:
        if isinstance(t, Struct):
            out.append(f"{ind}{target}, pos = {self.decoder(t)}(buf, pos, {end})")
        elif isinstance(t, ArrayOf):
            self.read_length(out, ind, self.flexible, True)
            self.read_null(out, ind, f, target)
            body = ind + "    "
            elem = t.element
            min_size = max(1, _min_size(elem, self.version, self.flexible))
            out.append(f"{body}if n * {min_size} > {end} - pos:")
            out.append(f"{body}    raise _Fault('count in {f.name} exceeds the bytes left')")
            if isinstance(elem, Struct):
                fn = self.decoder(elem)
                out.append(f"{body}{target} = []")
                out.append(f"{body}for _ in range(n):")
                out.append(f"{body}    x, pos = {fn}(buf, pos, {end})")
                out.append(f"{body}    {target}.append(x)")
            elif elem in FIXED_FORMAT:
                code = FIXED_FORMAT[elem]
                size = _fixed_size(elem)
                out.append(f"{body}{target} = list(_unpack_from('>%d{code}' % n, buf, pos))")
                out.append(f"{body}pos += n * {size}")
                if elem is Prim.UUID:
                    out.append(f"{body}{target} = [_mu(x) for x in {target}]")
            else:
                raise NotImplementedError(f"array of {elem}")
        elif t in FIXED_FORMAT:
            unpack = self.const(struct.Struct(">" + FIXED_FORMAT[t]).unpack_from)
            out.append(f"{ind}{target}, = {unpack}(buf, pos)")
            out.append(f"{ind}pos += {_fixed_size(t)}")
            if t is Prim.UUID:
                out.append(f"{ind}{target} = _mu({target})")
        else:
            self.read_length(out, ind, self.flexible, t is not Prim.STRING)
            self.read_null(out, ind, f, target)
            body = ind + "    "
            out.append(f"{body}e = pos + n")
            out.append(f"{body}if e > {end}:")
            out.append(f"{body}    raise _Fault('{f.name} runs past the end')")
            if t is Prim.STRING:
                out.append(f"{body}{target} = str(buf[pos:e], 'utf-8')")
            elif t is Prim.BYTES:
                out.append(f"{body}{target} = bytes(buf[pos:e])")
            else:  # records stay undecoded: a view into the frame, no copy
                out.append(f"{body}{target} = buf[pos:e]")
            out.append(f"{body}pos = e")

    def read_tagged(self, out: list[str], tagged: list[Field], var: dict[str, str]) -> None:
        out.extend(f"    {var[f.name]} = {self.fresh(default_of(f))}" for f in tagged)
        out.append("    tn, pos = _ruv(buf, pos)")
        out.append("    for _ in range(tn):")
        out.append("        tag, pos = _ruv(buf, pos)")
        out.append("        size, pos = _ruv(buf, pos)")
        out.append("        te = pos + size")
        out.append("        if te > end:")
        out.append("            raise _Fault('tagged field runs past the end')")
        kw = "if"
        for f in tagged:
            out.append(f"        {kw} tag == {f.tag}:")
            self.read_value(out, "            ", f, t=f.type, target=var[f.name], end="te")
            out.append("            if pos != te:")
            out.append(f"                raise _Fault('tagged field {f.name} has the wrong size')")
            kw = "elif"
        if tagged:
            out.append("        else:")
            out.append("            pos = te")
        else:
            out.append("        pos = te")

    # -- encoding ------------------------------------------------------------------------
    def encoder(self, s: Struct) -> str:
        key = id(s)
        if key in self.enc_names:
            return self.enc_names[key]
        name = f"_e{next(self.ids)}_{s.name}"
        self.enc_names[key] = name
        regular, tagged = self.present(s)
        out = [f"def {name}(m, out):", "    g = m.get", "    ap = out.append"]
        present = {f.name for f in regular} | {f.name for f in tagged}
        for f in s.fields:
            if f.name not in present and not f.ignorable and f.tag is None:
                self.check_absent(out, f)
        i = 0
        while i < len(regular):
            if _is_fixed(regular[i]):
                j = i
                while j < len(regular) and _is_fixed(regular[j]):
                    j += 1
                self.write_fixed_run(out, regular[i:j])
                i = j
            else:
                f = regular[i]
                out.append(f"    x = g({f.name!r}, {self.default_arg(f)})")
                self.write_value(out, "    ", f, t=f.type, x="x", lst="out", ap="ap")
                i += 1
        if self.flexible:
            self.write_tagged(out, tagged)
        self.src.append("\n".join(out))
        return name

    def default_arg(self, f: Field) -> str:
        d = default_of(f)
        if isinstance(f.type, ArrayOf) and d == []:
            return "()"
        if d is None or isinstance(d, bool | int | float | str):
            return repr(d)
        return self.const(d)

    def check_absent(self, out: list[str], f: Field) -> None:
        """Kafka refuses to drop a non-ignorable field that holds a non-default value."""
        d = default_of(f)
        msg = f"'{f.name} is not in version {self.version}'"
        if isinstance(f.type, ArrayOf) and d == []:
            out.append(f"    if g({f.name!r}, None):")
        else:
            dc = self.default_arg(f)
            out.append(f"    if g({f.name!r}, {dc}) != {dc}:")
        out.append(f"        raise _EncFault({msg})")

    def write_fixed_run(self, out: list[str], run: list[Field]) -> None:
        fmt = ">" + "".join(FIXED_FORMAT[f.type] for f in run if isinstance(f.type, Prim))
        pack = self.const(struct.Struct(fmt).pack)
        args = []
        for f in run:
            expr = f"g({f.name!r}, {self.default_arg(f)})"
            args.append(expr + ".bytes" if f.type is Prim.UUID else expr)
        out.append(f"    ap({pack}({', '.join(args)}))")

    def write_null(
        self, out: list[str], ind: str, f: Field, *, x: str, ap: str, wide: bool
    ) -> None:
        out.append(f"{ind}if {x} is None:")
        if not self.nullable(f):
            out.append(f"{ind}    raise _EncFault('null in non-nullable field {f.name}')")
        elif self.flexible:
            out.append(f"{ind}    {ap}(b'\\x00')")
        else:
            out.append(f"{ind}    {ap}({'_P32' if wide else '_P16'}(-1))")
        out.append(f"{ind}else:")

    def write_length(self, out: list[str], ind: str, n: str, ap: str, wide: bool) -> None:
        if self.flexible:
            out.append(f"{ind}{ap}(_uv({n} + 1))")
        else:
            out.append(f"{ind}{ap}({'_P32' if wide else '_P16'}({n}))")

    def write_value(
        self, out: list[str], ind: str, f: Field, *, t: FieldType, x: str, lst: str, ap: str
    ) -> None:
        body = ind + "    "
        if isinstance(t, Struct):
            out.append(f"{ind}{self.encoder(t)}({x}, {lst})")
        elif isinstance(t, ArrayOf):
            self.write_null(out, ind, f, x=x, ap=ap, wide=True)
            self.write_length(out, body, f"len({x})", ap, True)
            elem = t.element
            if isinstance(elem, Struct):
                fn = self.encoder(elem)
                out.append(f"{body}for y in {x}:")
                out.append(f"{body}    {fn}(y, {lst})")
            elif elem is Prim.UUID:
                out.append(f"{body}for y in {x}:")
                out.append(f"{body}    {ap}(y.bytes)")
            elif elem in FIXED_FORMAT:
                code = FIXED_FORMAT[elem]
                out.append(f"{body}{ap}(_pack('>%d{code}' % len({x}), *{x}))")
            else:
                raise NotImplementedError(f"array of {elem}")
        elif t in FIXED_FORMAT:
            pack = self.const(struct.Struct(">" + FIXED_FORMAT[t]).pack)
            suffix = ".bytes" if t is Prim.UUID else ""
            out.append(f"{ind}{ap}({pack}({x}{suffix}))")
        else:
            wide = t is not Prim.STRING
            self.write_null(out, ind, f, x=x, ap=ap, wide=wide)
            if t is Prim.STRING:
                out.append(f"{body}y = {x}.encode('utf-8')")
            else:
                out.append(f"{body}y = {x}")
            self.write_length(out, body, "len(y)", ap, wide)
            out.append(f"{body}{ap}(y)")

    def write_tagged(self, out: list[str], tagged: list[Field]) -> None:
        if not tagged:
            out.append("    ap(b'\\x00')")
            return
        out.append("    tg = []")
        for f in tagged:
            d = default_of(f)
            out.append(f"    x = g({f.name!r}, {self.default_arg(f)})")
            if isinstance(f.type, ArrayOf) and d == []:
                out.append("    if x:")
            elif d is None:
                out.append("    if x is not None:")
            else:
                out.append(f"    if x != {self.default_arg(f)}:")
            out.append("        sub = []")
            self.write_value(out, "        ", f, t=f.type, x="x", lst="sub", ap="sub.append")
            out.append("        y = b''.join(sub)")
            out.append(f"        tg.append({uvarint(f.tag or 0)!r} + _uv(len(y)) + y)")
        out.append("    ap(_uv(len(tg)))")
        out.append("    out.extend(tg)")

    def build(self) -> tuple[Encoder, Decoder]:
        root = self.spec.root
        enc_name = self.encoder(root)
        dec_name = self.decoder(root)
        source = "\n\n".join(self.src) + "\n"
        exec(compile(source, f"<kraft codec {self.spec.name} v{self.version}>", "exec"), self.ns)
        self.source = source
        enc = self.ns[enc_name]
        dec = self.ns[dec_name]
        assert callable(enc) and callable(dec)
        return enc, dec


@dataclass(frozen=True, slots=True)
class CompiledMessage:
    """The encoder and decoder of one message at one version."""

    spec: MessageSpec
    version: int
    encoder: Encoder
    decoder: Decoder
    malformed: type[MalformedMessageError]

    def encode(self, message: Message) -> bytes:
        return b"".join(self.encode_into(message, []))

    def encode_into(self, message: Message, out: list[bytes]) -> list[bytes]:
        """Append the body's pieces to `out` (after a header, say) so the caller joins once:
        a second copy of a 1 MiB body costs more than the whole encode."""
        try:
            self.encoder(message, out)
        except _EncodeRefusedError as e:
            raise EncodeError(f"{self.spec.name} v{self.version}: {e}") from None
        except _ENCODE_FAULTS as e:
            raise EncodeError(f"{self.spec.name} v{self.version}: {e!r}") from None
        return out

    def decode(self, buf: bytes | bytearray | memoryview) -> MessageDict:
        view = buf if isinstance(buf, memoryview) else memoryview(buf)
        end = len(view)
        try:
            message, pos = self.decoder(view, 0, end)
        except _DECODE_FAULTS as e:
            raise self.malformed(f"{self.spec.name} v{self.version}: {_describe(e)}") from None
        if pos != end:
            raise self.malformed(f"{self.spec.name} v{self.version}: {end - pos} trailing bytes")
        return message


def _describe(e: Exception) -> str:
    if isinstance(e, struct.error | IndexError):
        return "truncated"
    return str(e) or type(e).__name__


_compiled: dict[tuple[Direction, int, int], CompiledMessage] = {}


def compiled(direction: Direction, api_key: int, version: int) -> CompiledMessage:
    """The codec of one message; compiled on first use, then cached."""
    key = (direction, api_key, version)
    hit = _compiled.get(key)
    if hit is not None:
        return hit
    api = APIS.get(api_key)
    if api is None:
        raise UnknownApiKeyError(api_key)
    spec = api.message(direction)
    if version not in spec.valid:
        raise UnsupportedVersionError(api_key, version)
    enc, dec = _Compiler(spec, version).build()
    malformed = MalformedRequestError if direction is Direction.REQUEST else MalformedResponseError
    hit = CompiledMessage(spec, version, enc, dec, malformed)
    _compiled[key] = hit
    return hit


def generated_source(direction: Direction, api_key: int, version: int) -> str:
    """The Python source the compiler emits for one message (for review and debugging)."""
    api = APIS.get(api_key)
    if api is None:
        raise UnknownApiKeyError(api_key)
    spec = api.message(direction)
    if version not in spec.valid:
        raise UnsupportedVersionError(api_key, version)
    c = _Compiler(spec, version)
    c.build()
    return c.source


def encode_request(api_key: int, version: int, message: Message) -> bytes:
    return compiled(Direction.REQUEST, api_key, version).encode(message)


def decode_request(api_key: int, version: int, buf: bytes | bytearray | memoryview) -> MessageDict:
    return compiled(Direction.REQUEST, api_key, version).decode(buf)


def encode_response(api_key: int, version: int, message: Message) -> bytes:
    return compiled(Direction.RESPONSE, api_key, version).encode(message)


def decode_response(api_key: int, version: int, buf: bytes | bytearray | memoryview) -> MessageDict:
    return compiled(Direction.RESPONSE, api_key, version).decode(buf)
