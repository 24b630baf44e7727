"""Integration tests: real processes, real files, real sockets on loopback."""
