"""Apps: CLI, controller, agent, endpoint and dashboard, each a thin shell over the domain."""
