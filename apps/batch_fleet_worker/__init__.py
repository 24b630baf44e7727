"""A batch job's worker on the fleet: the second container of its Pod, beside the model
server. ``job`` sends the requests and keeps the results; ``bootstrap`` builds what it uses.
"""
