// Runs Kafka's own BatchAccumulator (the leader's batching of appends) over scripted appends
// and prints when each batch is written, for tests/interop/test_accumulator_kafka.py.
// Input: one script a line, with a linger of 25 ms and Kafka's 8 MiB batch limit. Its steps:
//   a:S,S,...  append records whose values take S bytes each (null keys)
//   t          the linger passes
// Output, a line a script: per append "ok" or "too-large" (RecordBatchTooLargeException); after
// every step, each batch the leader would write now, as b<base offset>+<record count>.
// Run with java's source-file mode and Kafka's jars on the class path.

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.errors.RecordBatchTooLargeException;
import org.apache.kafka.common.memory.MemoryPool;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.protocol.Readable;
import org.apache.kafka.common.protocol.Writable;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.raft.internals.BatchAccumulator;
import org.apache.kafka.server.common.serialization.RecordSerde;

public class BatchAccumulatorRun {
    static final int LINGER_MS = 25;
    static final int MAX_BATCH_BYTES = 8 * 1024 * 1024; // KafkaRaftClient.MAX_BATCH_SIZE_BYTES
    static final int EPOCH = 1;

    // Time only moves when a script says so.
    static final class ScriptClock implements Time {
        long ms = 1_000;

        public long milliseconds() {
            return ms;
        }

        public long nanoseconds() {
            return ms * 1_000_000L;
        }

        public void sleep(long d) {
            ms += d;
        }

        public void waitObject(Object o, Supplier<Boolean> done, long deadline) {
            throw new UnsupportedOperationException("no waiting in a script");
        }
    }

    // A record is its value's bytes.
    static final class ValueSerde implements RecordSerde<byte[]> {
        public int recordSize(byte[] value, ObjectSerializationCache cache) {
            return value.length;
        }

        public void write(byte[] value, ObjectSerializationCache cache, Writable out) {
            out.writeByteArray(value);
        }

        public byte[] read(Readable in, int size) {
            return in.readArray(size);
        }
    }

    public static void main(String[] args) throws Exception {
        for (String script : Files.readAllLines(Path.of(args[0]))) {
            ScriptClock clock = new ScriptClock();
            BatchAccumulator<byte[]> acc = new BatchAccumulator<>(
                EPOCH, 0L, LINGER_MS, MAX_BATCH_BYTES, 1_000, MemoryPool.NONE, clock,
                Compression.NONE, new ValueSerde());
            List<String> out = new ArrayList<>();
            for (String step : script.trim().split(" ")) {
                if (step.equals("t")) {
                    clock.sleep(LINGER_MS);
                } else {
                    List<byte[]> records = new ArrayList<>();
                    for (String size : step.substring(2).split(",")) {
                        records.add(new byte[Integer.parseInt(size)]);
                    }
                    try {
                        acc.append(EPOCH, records, false);
                        out.add("ok");
                    } catch (RecordBatchTooLargeException e) {
                        out.add("too-large");
                    }
                }
                if (acc.needsDrain(clock.milliseconds())) {
                    for (BatchAccumulator.CompletedBatch<byte[]> b : acc.drain()) {
                        if (b.sizeInBytes() > MAX_BATCH_BYTES) {
                            throw new IllegalStateException("a batch of " + b.sizeInBytes());
                        }
                        out.add("b" + b.baseOffset + "+" + b.numRecords);
                        b.release();
                    }
                }
            }
            System.out.println(String.join(" ", out));
        }
    }
}
