"""One MQTT broker per GBID: embedded amqtt (default), Mosquitto, or external URLs."""

from .broker_set import BrokerError, BrokerSet, parse_external
from .mosquitto import MosquittoNotFound
from .spec import BrokerSpec, BrokerSpecError, ExternalBroker, parse_broker

__all__ = [
    "BrokerError", "BrokerSet", "BrokerSpec", "BrokerSpecError", "ExternalBroker", "MosquittoNotFound",
    "parse_broker", "parse_external",
]
