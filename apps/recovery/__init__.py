"""Recovery: what a service does when its machine stops answering, set and shown.

``commands`` is what ``nodeau recovery`` and the dashboard ask; ``machine`` answers it on one
machine (the choice in the workload's record), ``fleet`` on Kubernetes (in the object's spec).
The moves themselves are the controller's (``apps.controller.recover``).
"""
