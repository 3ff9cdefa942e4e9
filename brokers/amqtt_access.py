"""Who the embedded amqtt broker lets in and which topics each login may use: the rules of
``brokers.access`` as amqtt plugins, and ``refusal``, the check of a CONNECT.

Separate from the broker (``brokers.amqtt_admitting``) because it is the policy, not the
MQTT machinery: amqtt calls the plugins by their dotted path, the broker calls ``refusal``
before it touches any session, and neither depends on how sessions are kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from amqtt.contexts import Action
from amqtt.plugins.base import BaseAuthPlugin, BaseTopicPlugin
from amqtt.session import Session

from brokers import access


def refusal(secret: str, session: Session) -> str | None:
    """Why a CONNECT is refused, or None: the login, then the will's topic."""
    why = access.admitted(secret, session.username, session.password, session.client_id)
    if why is None and session.will_flag and not access.may_publish(session.username or "", session.will_topic or ""):
        why = f"the will's topic {session.will_topic!r} is not one the user may publish to"
    return why


class ClientAuthPlugin(BaseAuthPlugin):
    """amqtt's own authentication step: the check ``AdmittingBroker`` already made.

    It never marks a session anonymous (as amqtt's AnonymousAuthPlugin does), so persistent
    sessions (clean_session false) keep their subscriptions and offline queue.
    """

    @dataclass
    class Config:
        secret: str = ""

    async def authenticate(self, *, session: Session) -> bool:
        return refusal(self.config.secret, session) is None


class TopicAclPlugin(BaseTopicPlugin):
    """The grants of ``brokers.access``. amqtt answers a refused SUBSCRIBE with return code
    0x80, acknowledges a refused PUBLISH and drops it, and skips a subscriber that may not
    receive a topic."""

    async def topic_filtering(
        self, *, session: Session | None = None, topic: str | None = None, action: Action | None = None
    ) -> bool:
        if session is None or not session.username or topic is None:
            return False
        if action == Action.SUBSCRIBE:
            return access.may_subscribe(session.username, topic)
        if action == Action.PUBLISH:
            return access.may_publish(session.username, topic)
        if action == Action.RECEIVE:
            return access.may_receive(session.username, topic)
        return False

