"""The shared contract suites: each runs against every implementation of its port."""
