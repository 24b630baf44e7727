"""The adapters a test plane's parts take from its home, as a command's parts do: who asks
(this user), the home's policy and entitlement files, the compiled-in keys, the model
servers' processes and log files, and the runtime's fit tool."""

from __future__ import annotations

from functools import cached_property

from nodeau.adapters.entitlement_document import compiled_in_verifier
from nodeau.adapters.entitlement_file import FileEntitlementStore
from nodeau.adapters.local_identity import LocalIdentity
from nodeau.adapters.organisation_file import FileOrganisationPolicy
from nodeau.adapters.runtime_estimate import FitTool
from nodeau.adapters.server_logs import ServerLogFiles
from nodeau.adapters.server_search import HomeServerWatch
from nodeau.apps.settings import Settings
from nodeau.ports.entitlements import EntitlementVerifier


class HomeAdapters:
    """Mixed into a test's ``MachineParts``: the real adapters over ``settings``' home."""

    settings: Settings

    @cached_property
    def watch(self) -> HomeServerWatch:
        return HomeServerWatch()

    @cached_property
    def server_logs(self) -> ServerLogFiles:
        return ServerLogFiles()

    @cached_property
    def fit_estimates(self) -> FitTool:
        return FitTool(self.settings.environ)

    @cached_property
    def identity(self) -> LocalIdentity:
        return LocalIdentity()

    @cached_property
    def organisation_policy(self) -> FileOrganisationPolicy:
        return FileOrganisationPolicy(self.settings.home)

    @cached_property
    def entitlements(self) -> FileEntitlementStore:
        return FileEntitlementStore(self.settings.home)

    @cached_property
    def verifier(self) -> EntitlementVerifier:
        return compiled_in_verifier()
