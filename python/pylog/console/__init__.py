"""The web console (``pylog console``): what a Kafka operator looks at —
the cluster, its topics and partitions, messages, consumer groups — served
by Starlette and rendered on the server by Jinja2, over pylog's own Kafka
client, so it works against any Kafka-protocol cluster.

:mod:`.admin` asks the cluster, :mod:`.app` serves the pages,
:mod:`.record_format` shows record bytes, :mod:`.audit` logs each change and
:mod:`.command` is the ``pylog console`` command (docs/console.md).

Layer 9 (edges), beside :mod:`pylog.cli`, whose client it is built on."""
