package io.pylog.testclient;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;

/** Admin: create, describe and delete topics, list them, describe the cluster and a topic's configs. */
final class AdminCommand {
    private final Args args;

    AdminCommand(Args args) {
        this.args = args;
    }

    int run() throws Exception {
        if (args.positional.isEmpty()) {
            throw new Args.UsageException("admin takes an action: create-topic, describe-topic, "
                    + "delete-topic, list-topics, describe-cluster, describe-configs");
        }
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args.require("bootstrap"));
        props.putAll(args.pairs("property"));
        try (Admin admin = Admin.create(props)) {
            switch (args.positional.get(0)) {
                case "create-topic" -> createTopic(admin);
                case "describe-topic" -> describeTopics(admin);
                case "delete-topic" -> {
                    List<String> topics = topics();
                    admin.deleteTopics(topics).all().get();
                    Main.emit(Json.obj("type", "deleted", "topics", topics));
                }
                case "list-topics" -> Main.emit(Json.obj("type", "topics",
                        "names", new ArrayList<>(new java.util.TreeSet<>(admin.listTopics().names().get()))));
                case "describe-cluster" -> describeCluster(admin);
                case "describe-configs" -> describeConfigs(admin);
                default -> throw new Args.UsageException("unknown admin action " + args.positional.get(0));
            }
        }
        Main.emit(Json.obj("type", "done"));
        return 0;
    }

    private List<String> topics() {
        return Arrays.asList(args.require("topic").split(","));
    }

    private void createTopic(Admin admin) throws Exception {
        String topic = args.require("topic");
        Optional<Integer> partitions = args.has("partitions")
                ? Optional.of(args.getInt("partitions", 1)) : Optional.empty();
        Optional<Short> rf = args.has("replication-factor")
                ? Optional.of((short) args.getInt("replication-factor", 1)) : Optional.empty();
        NewTopic newTopic = new NewTopic(topic, partitions, rf).configs(args.pairs("config"));
        CreateTopicsResult result = admin.createTopics(List.of(newTopic));
        result.all().get();
        Main.emit(Json.obj("type", "created", "topic", topic,
                "topicId", result.topicId(topic).get().toString(),
                "partitions", result.numPartitions(topic).get(),
                "replicationFactor", result.replicationFactor(topic).get()));
    }

    private void describeTopics(Admin admin) throws Exception {
        Map<String, TopicDescription> found = admin.describeTopics(topics()).allTopicNames().get();
        for (String name : topics()) {
            TopicDescription d = found.get(name);
            List<Object> parts = new ArrayList<>();
            for (TopicPartitionInfo p : d.partitions()) {
                parts.add(Json.obj("partition", p.partition(),
                        "leader", p.leader() == null ? null : p.leader().id(),
                        "replicas", ids(p.replicas()), "isr", ids(p.isr())));
            }
            Main.emit(Json.obj("type", "topic", "name", d.name(), "topicId", d.topicId().toString(),
                    "internal", d.isInternal(), "partitions", parts));
        }
    }

    private void describeCluster(Admin admin) throws Exception {
        DescribeClusterResult r = admin.describeCluster();
        List<Object> nodes = new ArrayList<>();
        for (Node n : r.nodes().get()) {
            nodes.add(Json.obj("id", n.id(), "host", n.host(), "port", n.port(), "rack", n.rack()));
        }
        Node controller = r.controller().get();
        Main.emit(Json.obj("type", "cluster", "clusterId", r.clusterId().get(),
                "controller", controller == null ? null : controller.id(), "nodes", nodes));
    }

    private void describeConfigs(Admin admin) throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, args.require("topic"));
        Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        Map<String, Object> values = new TreeMap<>();
        for (ConfigEntry e : config.entries()) {
            values.put(e.name(), e.value());
        }
        Main.emit(Json.obj("type", "configs", "topic", resource.name(), "configs", values));
    }

    private static List<Integer> ids(List<Node> nodes) {
        List<Integer> out = new ArrayList<>();
        nodes.forEach(n -> out.add(n.id()));
        return out;
    }
}
