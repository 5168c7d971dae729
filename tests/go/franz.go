package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// franz drives franz-go: kgo for producing and consuming, kadm for admin.
type franz struct{}

func (franz) client(o *options, extra ...kgo.Opt) (*kgo.Client, error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(o.bootstrap...)}, extra...)
	return kgo.NewClient(opts...)
}

func franzCompression(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("unknown compression %q", name)
}

func (f franz) produce(ctx context.Context, o *options) error {
	codec, err := franzCompression(o.compression)
	if err != nil {
		return err
	}
	opts := []kgo.Opt{kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic(o.topic)}
	switch o.acks {
	case "all":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	default:
		return fmt.Errorf("unknown acks %q", o.acks)
	}
	// franz-go writes idempotently by default, which needs acks=all.
	if !o.idempotent || o.acks != "all" {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if o.partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := f.client(o, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	var mu sync.Mutex
	var wg sync.WaitGroup
	acked, failed := 0, 0
	for i := o.start; i < o.start+o.count; i++ {
		rec := &kgo.Record{
			Key:     key(o, i),
			Value:   value(o, i),
			Headers: []kgo.RecordHeader{{Key: "index", Value: []byte(strconv.Itoa(i))}},
		}
		if o.partition >= 0 {
			rec.Partition = int32(o.partition)
		}
		wg.Add(1)
		index := i
		cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				emit("failed", map[string]any{"index": index, "error": err.Error()})
				return
			}
			acked++
			emit("ack", map[string]any{
				"index": index, "partition": r.Partition, "offset": r.Offset,
				"timestamp": r.Timestamp.UnixMilli(), "producerId": r.ProducerID,
				"producerEpoch": r.ProducerEpoch,
			})
		})
	}
	wg.Wait()
	emit("done", map[string]any{"acked": acked, "failed": failed})
	return nil
}

func franzRecord(r *kgo.Record) map[string]any {
	headers := map[string]string{}
	for _, h := range r.Headers {
		headers[h.Key] = string(h.Value)
	}
	return map[string]any{
		"topic": r.Topic, "partition": r.Partition, "offset": r.Offset,
		"key": nullable(r.Key), "value": nullable(r.Value), "headers": headers,
		"timestamp": r.Timestamp.UnixMilli(), "leaderEpoch": r.LeaderEpoch,
	}
}

// endOffsets reads the high watermark of each partition of the topic.
func (f franz) endOffsets(ctx context.Context, o *options) (map[int32]int64, error) {
	cl, err := f.client(o)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	listed, err := kadm.NewClient(cl).ListEndOffsets(ctx, o.topic)
	if err != nil {
		return nil, err
	}
	if err := listed.Error(); err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	listed.Each(func(l kadm.ListedOffset) { ends[l.Partition] = l.Offset })
	return ends, nil
}

func (f franz) consume(ctx context.Context, o *options) error {
	ends, err := f.endOffsets(ctx, o)
	if err != nil {
		return err
	}
	start := kgo.NewOffset().At(o.offset)
	switch o.offset {
	case -2:
		start = kgo.NewOffset().AtStart()
	case -1:
		start = kgo.NewOffset().AtEnd()
	}
	assign := map[int32]kgo.Offset{}
	for p := range ends {
		if o.partition < 0 || p == int32(o.partition) {
			assign[p] = start
		}
	}
	if len(assign) == 0 {
		return fmt.Errorf("topic %s has no partition %d", o.topic, o.partition)
	}
	cl, err := f.client(o, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: assign}))
	if err != nil {
		return err
	}
	defer cl.Close()

	// With --to-end a partition is finished once the next offset to read
	// reaches its end offset read above; with --count once that many arrived.
	next := map[int32]int64{}
	for p := range assign {
		switch {
		case o.offset == -1:
			next[p] = ends[p]
		case o.offset >= 0:
			next[p] = o.offset
		}
	}
	finished := func(count int) bool {
		if !o.toEnd {
			return count >= o.count
		}
		for p := range assign {
			if next[p] < ends[p] {
				return false
			}
		}
		return true
	}
	count := 0
	for !finished(count) {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		var fetchErr error
		fetches.EachError(func(t string, p int32, err error) { fetchErr = fmt.Errorf("%s[%d]: %w", t, p, err) })
		if fetchErr != nil {
			return fetchErr
		}
		fetches.EachRecord(func(r *kgo.Record) {
			count++
			next[r.Partition] = r.Offset + 1
			emit("record", franzRecord(r))
		})
	}
	emit("done", map[string]any{"count": count, "complete": finished(count)})
	return nil
}

func (f franz) groupConsume(ctx, stop context.Context, o *options) error {
	owned := map[int32]bool{}
	var ownedMu sync.Mutex
	change := func(kind string, m map[string][]int32, add bool) {
		if len(m[o.topic]) == 0 {
			return // a cooperative rebalance that moved nothing of ours
		}
		ownedMu.Lock()
		defer ownedMu.Unlock()
		for _, p := range m[o.topic] {
			if add {
				owned[p] = true
			} else {
				delete(owned, p)
			}
		}
		emit(kind, map[string]any{"partitions": m[o.topic]})
		emit("owned", map[string]any{"partitions": sortedPartitions(owned)})
	}
	// Offsets are committed by hand after each poll, and rebalances wait for
	// that (BlockRebalanceOnPoll): a partition handed to another member
	// resumes exactly after the last record this one printed.
	opts := []kgo.Opt{}
	switch o.serverAssignor {
	case "":
	case "uniform": // franz-go maps its sticky balancer to the broker's uniform assignor
		opts = append(opts, kgo.Balancers(kgo.StickyBalancer()), kgo.ServerSideBalancer())
	case "range":
		opts = append(opts, kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer())
	default:
		return fmt.Errorf("unknown --server-assignor %q", o.serverAssignor)
	}
	cl, err := f.client(o, append(opts,
		kgo.ConsumerGroup(o.group),
		kgo.ConsumeTopics(o.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			change("assigned", m, true)
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			change("revoked", m, false)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			change("lost", m, false)
		}),
	)...)
	if err != nil {
		return err
	}
	count := 0
	for {
		fetches := cl.PollFetches(stop)
		if fetches.IsClientClosed() {
			break
		}
		var fetchErr error
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				fetchErr = fmt.Errorf("%s[%d]: %w", t, p, err)
			}
		})
		if fetchErr != nil {
			emit("fetch-error", map[string]any{"error": fetchErr.Error()})
		}
		polled := 0
		fetches.EachRecord(func(r *kgo.Record) {
			count++
			polled++
			emit("record", franzRecord(r))
		})
		if polled > 0 {
			offsets := cl.UncommittedOffsets()
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				emit("commit-error", map[string]any{"error": err.Error()})
			} else {
				committed := map[string]int64{}
				for p, off := range offsets[o.topic] {
					committed[strconv.Itoa(int(p))] = off.Offset
				}
				emit("committed", map[string]any{"offsets": committed})
			}
		}
		cl.AllowRebalance()
		if stop.Err() != nil {
			break
		}
	}
	// Close leaves the group (LeaveGroup), so the others rebalance at once.
	cl.AllowRebalance()
	cl.Close()
	emit("done", map[string]any{"count": count})
	return nil
}

func (f franz) admin(ctx context.Context, op string, o *options) error {
	cl, err := f.client(o)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	switch op {
	case "create-topic":
		configs := map[string]*string{}
		for k, v := range o.configs {
			configs[k] = kadm.StringPtr(v)
		}
		resp, err := adm.CreateTopics(ctx, int32(o.partitions), int16(o.replication), configs, o.topic)
		if err != nil {
			return err
		}
		r := resp[o.topic]
		emit("created", map[string]any{
			"topic": o.topic, "error": errName(r.Err), "partitions": r.NumPartitions,
			"replicationFactor": r.ReplicationFactor, "topicId": r.ID.String(),
		})
	case "delete-topic":
		resp, err := adm.DeleteTopics(ctx, o.topic)
		if err != nil {
			return err
		}
		emit("deleted", map[string]any{"topic": o.topic, "error": errName(resp[o.topic].Err)})
	case "list-topics", "describe-topic":
		var topics []string
		if op == "describe-topic" {
			topics = []string{o.topic}
		}
		details, err := adm.ListTopics(ctx, topics...)
		if err != nil {
			return err
		}
		out := map[string]any{}
		for name, d := range details {
			parts := []map[string]any{}
			for _, p := range d.Partitions.Sorted() {
				parts = append(parts, map[string]any{
					"partition": p.Partition, "leader": p.Leader, "leaderEpoch": p.LeaderEpoch,
					"replicas": p.Replicas, "isr": p.ISR, "error": errName(p.Err),
				})
			}
			out[name] = map[string]any{
				"error": errName(d.Err), "internal": d.IsInternal, "partitions": parts,
				"topicId": d.ID.String(),
			}
		}
		emit("topics", map[string]any{"topics": out})
	case "list-groups":
		groups, err := adm.ListGroups(ctx)
		if err != nil {
			return err
		}
		out := map[string]any{}
		for name, g := range groups {
			out[name] = map[string]any{"protocolType": g.ProtocolType, "state": g.State}
		}
		emit("groups", map[string]any{"groups": out})
	case "offsets":
		resp, err := adm.FetchOffsets(ctx, o.group)
		if err != nil {
			return err
		}
		out := map[string]int64{}
		var firstErr error
		resp.Each(func(r kadm.OffsetResponse) {
			if r.Topic == o.topic {
				out[strconv.Itoa(int(r.Partition))] = r.At
			}
			if r.Err != nil && firstErr == nil {
				firstErr = r.Err
			}
		})
		emit("offsets", map[string]any{"group": o.group, "offsets": out, "error": errName(firstErr)})
	case "end-offsets":
		ends, err := f.endOffsets(ctx, o)
		if err != nil {
			return err
		}
		out := map[string]int64{}
		for p, off := range ends {
			out[strconv.Itoa(int(p))] = off
		}
		emit("end-offsets", map[string]any{"topic": o.topic, "offsets": out})
	default:
		return fmt.Errorf("unknown admin operation %q", op)
	}
	emit("done", map[string]any{})
	return nil
}
