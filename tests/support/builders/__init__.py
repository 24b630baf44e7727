"""Builders of the values and files the tests take: models, fleets, records."""
