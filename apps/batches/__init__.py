"""Batch jobs: a file of OpenAI requests run on one admitted card, results kept as written.

``commands`` is what ``nodeau batch`` and the dashboard ask; ``machine`` runs a job here (a
worker process and files under NODEAU_HOME), ``fleet`` asks the controller with a BatchJob.
``lifecycle`` starts a job's model server and records its end on one machine.
"""
