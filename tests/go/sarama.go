package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/IBM/sarama"
)

// saramaLib drives sarama: SyncProducer, Consumer, ConsumerGroup, ClusterAdmin.
type saramaLib struct{}

func (saramaLib) config(o *options) (*sarama.Config, error) {
	cfg := sarama.NewConfig()
	v, err := sarama.ParseKafkaVersion(o.version)
	if err != nil {
		return nil, err
	}
	cfg.Version = v
	cfg.ClientID = "pylog-go-sarama"
	return cfg, nil
}

func (s saramaLib) produce(ctx context.Context, o *options) error {
	cfg, err := s.config(o)
	if err != nil {
		return err
	}
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	switch o.acks {
	case "all":
		cfg.Producer.RequiredAcks = sarama.WaitForAll
	case "1":
		cfg.Producer.RequiredAcks = sarama.WaitForLocal
	case "0":
		cfg.Producer.RequiredAcks = sarama.NoResponse
	default:
		return fmt.Errorf("unknown acks %q", o.acks)
	}
	if o.idempotent && o.acks == "all" {
		// sarama's idempotent producer needs one request in flight per broker.
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
	}
	switch o.compression {
	case "none":
		cfg.Producer.Compression = sarama.CompressionNone
	case "gzip":
		cfg.Producer.Compression = sarama.CompressionGZIP
	case "snappy":
		cfg.Producer.Compression = sarama.CompressionSnappy
	case "lz4":
		cfg.Producer.Compression = sarama.CompressionLZ4
	case "zstd":
		cfg.Producer.Compression = sarama.CompressionZSTD
	default:
		return fmt.Errorf("unknown compression %q", o.compression)
	}
	if o.partition >= 0 {
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
	}
	producer, err := sarama.NewAsyncProducer(o.bootstrap, cfg)
	if err != nil {
		return err
	}

	// Acks arrive on two channels while records are still being sent.
	acked, failed := 0, 0
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for m := range producer.Successes() {
			acked++
			emit("ack", map[string]any{
				"index": m.Metadata.(int), "partition": m.Partition, "offset": m.Offset,
			})
		}
	}()
	go func() {
		defer wg.Done()
		for e := range producer.Errors() {
			failed++
			emit("failed", map[string]any{"index": e.Msg.Metadata.(int), "error": errName(e.Err)})
		}
	}()
	for i := o.start; i < o.start+o.count; i++ {
		msg := &sarama.ProducerMessage{
			Topic:    o.topic,
			Value:    sarama.ByteEncoder(value(o, i)),
			Headers:  []sarama.RecordHeader{{Key: []byte("index"), Value: []byte(strconv.Itoa(i))}},
			Metadata: i,
		}
		if k := key(o, i); k != nil {
			msg.Key = sarama.ByteEncoder(k)
		}
		if o.partition >= 0 {
			msg.Partition = int32(o.partition)
		}
		select {
		case producer.Input() <- msg:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	producer.AsyncClose() // flushes, then closes both channels
	wg.Wait()
	emit("done", map[string]any{"acked": acked, "failed": failed})
	return nil
}

func saramaRecord(m *sarama.ConsumerMessage) map[string]any {
	headers := map[string]string{}
	for _, h := range m.Headers {
		headers[string(h.Key)] = string(h.Value)
	}
	return map[string]any{
		"topic": m.Topic, "partition": m.Partition, "offset": m.Offset,
		"key": nullable(m.Key), "value": nullable(m.Value), "headers": headers,
		"timestamp": m.Timestamp.UnixMilli(),
	}
}

func (s saramaLib) consume(ctx context.Context, o *options) error {
	cfg, err := s.config(o)
	if err != nil {
		return err
	}
	cfg.Consumer.Return.Errors = true
	client, err := sarama.NewClient(o.bootstrap, cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	all, err := client.Partitions(o.topic)
	if err != nil {
		return err
	}
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return err
	}
	defer consumer.Close()

	// Every assigned partition feeds one channel; --to-end stops a partition
	// at the end offset read before consuming.
	type item struct {
		msg *sarama.ConsumerMessage
		err error
	}
	items := make(chan item)
	ends := map[int32]int64{}
	next := map[int32]int64{}
	for _, p := range all {
		if o.partition >= 0 && p != int32(o.partition) {
			continue
		}
		end, err := client.GetOffset(o.topic, p, sarama.OffsetNewest)
		if err != nil {
			return err
		}
		ends[p] = end
		start := o.offset
		switch o.offset {
		case -2:
			start = sarama.OffsetOldest
		case -1:
			start = sarama.OffsetNewest
			next[p] = end
		default:
			next[p] = o.offset
		}
		pc, err := consumer.ConsumePartition(o.topic, p, start)
		if err != nil {
			return err
		}
		defer pc.AsyncClose()
		go func() {
			for m := range pc.Messages() {
				select {
				case items <- item{msg: m}:
				case <-ctx.Done():
					return
				}
			}
		}()
		go func() {
			for e := range pc.Errors() {
				select {
				case items <- item{err: e}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	if len(ends) == 0 {
		return fmt.Errorf("topic %s has no partition %d", o.topic, o.partition)
	}
	finished := func(count int) bool {
		if !o.toEnd {
			return count >= o.count
		}
		for p, end := range ends {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	count := 0
	for !finished(count) {
		select {
		case it := <-items:
			if it.err != nil {
				return it.err
			}
			count++
			next[it.msg.Partition] = it.msg.Offset + 1
			emit("record", saramaRecord(it.msg))
		case <-ctx.Done():
			emit("done", map[string]any{"count": count, "complete": false})
			return nil
		}
	}
	emit("done", map[string]any{"count": count, "complete": true})
	return nil
}

// groupHandler prints the partitions each session gets and the records it
// reads, marking each and committing whenever its claim's buffer is empty.
type groupHandler struct {
	topic string
	mu    sync.Mutex
	count int
	owned map[int32]bool
}

func (h *groupHandler) Setup(sess sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	parts := sess.Claims()[h.topic]
	for _, p := range parts {
		h.owned[p] = true
	}
	emit("assigned", map[string]any{"partitions": parts, "generation": sess.GenerationID()})
	emit("owned", map[string]any{"partitions": sortedPartitions(h.owned)})
	return nil
}

func (h *groupHandler) Cleanup(sess sarama.ConsumerGroupSession) error {
	// sarama's eager protocol gives everything back at each rebalance.
	sess.Commit()
	h.mu.Lock()
	defer h.mu.Unlock()
	parts := sess.Claims()[h.topic]
	for _, p := range parts {
		delete(h.owned, p)
	}
	emit("revoked", map[string]any{"partitions": parts})
	emit("owned", map[string]any{"partitions": sortedPartitions(h.owned)})
	return nil
}

func (h *groupHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			h.mu.Lock()
			h.count++
			h.mu.Unlock()
			emit("record", saramaRecord(m))
			sess.MarkMessage(m, "")
			if len(claim.Messages()) == 0 {
				sess.Commit()
				emit("committed", map[string]any{"offsets": map[string]int64{
					strconv.Itoa(int(m.Partition)): m.Offset + 1,
				}})
			}
		case <-sess.Context().Done():
			return nil
		}
	}
}

func (s saramaLib) groupConsume(ctx, stop context.Context, o *options) error {
	cfg, err := s.config(o)
	if err != nil {
		return err
	}
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	// Commits are made by the handler (and at each session's end), not on a timer.
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Return.Errors = true
	group, err := sarama.NewConsumerGroup(o.bootstrap, o.group, cfg)
	if err != nil {
		return err
	}
	go func() {
		for e := range group.Errors() {
			emit("group-error", map[string]any{"error": e.Error()})
		}
	}()
	h := &groupHandler{topic: o.topic, owned: map[int32]bool{}}
	for stop.Err() == nil {
		// Consume returns at each rebalance; the loop joins again.
		if err := group.Consume(stop, []string{o.topic}, h); err != nil {
			if errors.Is(err, sarama.ErrClosedConsumerGroup) {
				break
			}
			emit("group-error", map[string]any{"error": err.Error()})
		}
	}
	// Close leaves the group (LeaveGroup), so the others rebalance at once.
	if err := group.Close(); err != nil {
		return err
	}
	emit("done", map[string]any{"count": h.count})
	return nil
}

func (s saramaLib) admin(ctx context.Context, op string, o *options) error {
	cfg, err := s.config(o)
	if err != nil {
		return err
	}
	adm, err := sarama.NewClusterAdmin(o.bootstrap, cfg)
	if err != nil {
		return err
	}
	defer adm.Close()
	switch op {
	case "create-topic":
		configs := map[string]*string{}
		for k, v := range o.configs {
			configs[k] = &v
		}
		err := adm.CreateTopic(o.topic, &sarama.TopicDetail{
			NumPartitions: int32(o.partitions), ReplicationFactor: int16(o.replication),
			ConfigEntries: configs,
		}, false)
		emit("created", map[string]any{"topic": o.topic, "error": errName(err)})
	case "delete-topic":
		err := adm.DeleteTopic(o.topic)
		emit("deleted", map[string]any{"topic": o.topic, "error": errName(err)})
	case "list-topics":
		topics, err := adm.ListTopics()
		if err != nil {
			return err
		}
		out := map[string]any{}
		for name, d := range topics {
			out[name] = map[string]any{
				"partitions": d.NumPartitions, "replicationFactor": d.ReplicationFactor,
				"configs": d.ConfigEntries,
			}
		}
		emit("topics", map[string]any{"topics": out})
	case "describe-topic":
		metas, err := adm.DescribeTopics([]string{o.topic})
		if err != nil {
			return err
		}
		out := map[string]any{}
		for _, m := range metas {
			parts := []map[string]any{}
			for _, p := range m.Partitions {
				parts = append(parts, map[string]any{
					"partition": p.ID, "leader": p.Leader, "leaderEpoch": p.LeaderEpoch,
					"replicas": p.Replicas, "isr": p.Isr, "error": errName(kafkaErr(p.Err)),
				})
			}
			out[m.Name] = map[string]any{
				"error": errName(kafkaErr(m.Err)), "internal": m.IsInternal, "partitions": parts,
			}
		}
		emit("topics", map[string]any{"topics": out})
	case "list-groups":
		groups, err := adm.ListConsumerGroups()
		if err != nil {
			return err
		}
		out := map[string]any{}
		for name, protocolType := range groups {
			out[name] = map[string]any{"protocolType": protocolType}
		}
		emit("groups", map[string]any{"groups": out})
	case "offsets":
		resp, err := adm.ListConsumerGroupOffsets(o.group, nil)
		if err != nil {
			return err
		}
		out := map[string]int64{}
		for p, b := range resp.Blocks[o.topic] {
			out[strconv.Itoa(int(p))] = b.Offset
		}
		emit("offsets", map[string]any{"group": o.group, "offsets": out, "error": errName(kafkaErr(resp.Err))})
	case "end-offsets":
		client, err := sarama.NewClient(o.bootstrap, cfg)
		if err != nil {
			return err
		}
		defer client.Close()
		parts, err := client.Partitions(o.topic)
		if err != nil {
			return err
		}
		out := map[string]int64{}
		for _, p := range parts {
			end, err := client.GetOffset(o.topic, p, sarama.OffsetNewest)
			if err != nil {
				return err
			}
			out[strconv.Itoa(int(p))] = end
		}
		emit("end-offsets", map[string]any{"topic": o.topic, "offsets": out})
	default:
		return fmt.Errorf("unknown admin operation %q", op)
	}
	emit("done", map[string]any{})
	return nil
}

// kafkaErr turns sarama's ErrNoError into nil.
func kafkaErr(k sarama.KError) error {
	if k == sarama.ErrNoError {
		return nil
	}
	return k
}
