"""One interface for the CLI, two planes behind it: this machine, or a fleet on Kubernetes.

A command is written once against :class:`nodeau.apps.planes.plane.Plane` and
prints the same JSON shape whichever plane serves it; the plane is chosen once,
at start-up, by the CLI's composition root.
"""
