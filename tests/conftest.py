"""Shared test helpers live beside this file (tests/fake_log.py); pytest puts this directory
on sys.path because of this conftest."""
