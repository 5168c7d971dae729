"""The wire: SocketServer (acceptors and per-connection processors), the bounded
RequestChannel between them and the request handlers, and request metrics."""

from pylog.network.metrics import MetricsRegistry, MetricsServer
from pylog.network.processor import Processor
from pylog.network.request_channel import Chunk, Request, RequestChannel, RequestHandler, Response
from pylog.network.socket_server import Acceptor, ListenerSpec, SocketServer

__all__ = [
    "Acceptor",
    "Chunk",
    "ListenerSpec",
    "MetricsRegistry",
    "MetricsServer",
    "Processor",
    "Request",
    "RequestChannel",
    "RequestHandler",
    "Response",
    "SocketServer",
]
