"""One MQTT broker per GBID: embedded amqtt (default), Mosquitto, or external URLs."""

from .broker_set import BrokerError, BrokerSet, parse_external
from .mosquitto import MosquittoNotFound

__all__ = ["BrokerError", "BrokerSet", "MosquittoNotFound", "parse_external"]
