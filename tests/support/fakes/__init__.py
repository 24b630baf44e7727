"""In-memory stand-ins for the ports, and the worlds the tests build from them."""
