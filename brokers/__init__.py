"""One MQTT broker per GBID: embedded amqtt (default), Mosquitto, or external URLs."""

from .broker_set import BrokerError, BrokerSet
from .mosquitto import MosquittoNotFound
from .spec import BrokerSpec, BrokerSpecError, ExternalBroker, parse_broker, redact

__all__ = [
    "BrokerError", "BrokerSet", "BrokerSpec", "BrokerSpecError", "ExternalBroker", "MosquittoNotFound",
    "parse_broker", "redact",
]
