"""Loopback simulators of outside APIs: real HTTP servers on 127.0.0.1, deterministic, with call
counting and programmable error injection. Used by tests, benchmarks and the demo; production code
talks to them through the same clients, only the base URL differs."""
