"""Helpers that start or drive real things: API server and KWOK, servers, processes."""
