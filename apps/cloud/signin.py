"""``nodeau cloud connect`` and ``disconnect``: sign-in, the association, the entitlement.

Why it is so: docs/adr/decisions/apps-cloud.md (signin.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from attrs import frozen

from nodeau.apps.planes.plane import Plane
from nodeau.apps.plans.commands import PlanInstall
from nodeau.domain.cloud import (
    Association,
    OperationKind,
    SignInState,
    next_interval,
    sign_in_ended,
)
from nodeau.ports.cloud import (
    CloudError,
    CloudRefused,
    CloudState,
    DeviceCode,
    Installation,
    NodeauCloud,
)


class SignInEnded(CloudError):
    """The sign-in ended without an account; nothing was kept."""


@frozen(kw_only=True)
class Connected:
    """What ``connect`` did: the association kept, and what became of the entitlement."""

    association: Association
    entitlement: PlanInstall | None  # None: the cloud gave none (the plan is unchanged)


def sign_in(
    cloud: NodeauCloud,
    installation: Installation,
    *,
    wait: timedelta,
    clock: Callable[[], datetime],
    sleep: Callable[[float], None],
    say: Callable[[DeviceCode], None],
) -> tuple[str, str, str, bytes | None]:
    """The device-code flow: (account, installation, credential, entitlement)."""
    code = cloud.start_sign_in(installation)
    say(code)
    allowed_for = min(code.expires_in, wait)
    deadline = clock() + allowed_for
    interval = code.interval
    while True:
        sleep(interval.total_seconds())
        poll = cloud.poll_sign_in(code)
        if poll.state is SignInState.APPROVED:
            if poll.account is None or poll.token is None or poll.installation_id is None:
                raise CloudRefused("Nodeau Cloud approved the sign-in but gave no account")
            return poll.account, poll.installation_id, poll.token, poll.entitlement
        ended = sign_in_ended(poll.state)
        if ended is not None:
            raise SignInEnded(f"Not connected: {ended}; nothing was kept.")
        interval = next_interval(poll.state, interval)
        if clock() + interval > deadline:
            raise SignInEnded(
                "Not connected: the sign-in was not approved within"
                f" {allowed_for.total_seconds():g} s; nothing was kept."
                " Run nodeau cloud connect again."
            )


def connect(
    plane: Plane,
    cloud: NodeauCloud,
    state: CloudState,
    installation: Installation,
    *,
    base_url: str,
    fleet: bool,
    allowed: frozenset[OperationKind],
    wait: timedelta,
    clock: Callable[[], datetime],
    sleep: Callable[[float], None],
    say: Callable[[DeviceCode], None],
) -> Connected:
    """Sign in, keep the association, and install the entitlement the cloud gave, if any."""
    account, registered, token, entitlement = sign_in(
        cloud, installation, wait=wait, clock=clock, sleep=sleep, say=say
    )
    if registered != installation.installation_id:
        raise CloudRefused(
            f"Nodeau Cloud registered installation {registered!r}, but this installation is"
            f" {installation.installation_id!r}; nothing was kept"
        )
    association = Association(
        base_url=base_url,
        account=account,
        installation_id=registered,
        token=token,
        connected_at=clock(),
        fleet=fleet,
        allowed=allowed,
    )
    state.keep(association)
    installed = (
        None
        if entitlement is None
        else plane.plans.install(entitlement, f"the entitlement from Nodeau Cloud ({base_url})")
    )
    return Connected(association=association, entitlement=installed)


def disconnect(cloud: NodeauCloud | None, state: CloudState) -> tuple[bool, str | None]:
    """Forget the association, telling the cloud once; (whether there was one, the cloud's
    failure when it did not answer)."""
    association = state.association()
    if association is None:
        return False, None
    failure = None
    if cloud is not None:
        try:
            cloud.disconnect(association)
        except CloudError as exc:
            failure = exc.one_line()
    state.forget()
    return True, failure
