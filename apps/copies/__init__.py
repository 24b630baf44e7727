"""Copies: verified model files kept on the machines a recovery may move a service to.

``commands`` is what ``nodeau models copy|copies`` and the dashboard ask; ``fleet`` answers
it through the copy requests and the agents' reports; ``machine`` refuses, saying why: one
machine has no other machine to keep a copy on.
"""
