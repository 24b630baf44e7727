"""The detached worker of one batch job on this machine, started by ``nodeau batch submit``.
``job`` sends its requests, keeps its results and frees its card; ``bootstrap`` builds what
it uses.
"""
