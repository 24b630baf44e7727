"""Serving: ``nodeau run|stop|ps|logs``, ``service explain`` and ``plan explain``.

``commands.py`` holds what the commands ask and show and the ``ServingCommands`` interface;
``machine.py`` and ``fleet.py`` carry them out on each plane; ``model_servers.py`` admits,
starts, stops and supervises this machine's model servers.
"""
