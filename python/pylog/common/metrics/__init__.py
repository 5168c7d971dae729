"""The measuring vocabulary of the quotas (Kafka's ``org.apache.kafka.common.metrics``):
rates over rolling windows and the token bucket, shared by the network layer's
ConnectionQuotas and the server's quota managers."""
