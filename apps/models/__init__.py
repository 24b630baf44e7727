"""This machine's models: ``actions`` imports, pulls, verifies, resolves and describes them;
``services`` builds the store, registry, inspector and catalogs they use; ``removal`` decides
what deleting one keeps; ``catalog_add`` adds a person's own catalog entry from a file.
"""
