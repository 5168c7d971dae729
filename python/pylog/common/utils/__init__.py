"""Small helpers with no broker knowledge (Kafka's ``org.apache.kafka.common.utils``)."""
