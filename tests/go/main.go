// Command pylog-go-client drives the Go Kafka clients against a broker for
// pylog's integration tests (tests/integration/test_go_clients.py): franz-go
// (kgo, kadm) and sarama, each behind the same subcommands, printing one JSON
// object per line so the Python tests can assert on what the client saw.
//
//	pylog-go-client <franz|sarama> produce       --bootstrap B --topic T --count N [--partition P] [--acks all|1|0] [--idempotent=false] [--compression C]
//	pylog-go-client <franz|sarama> consume       --bootstrap B --topic T [--partition P] [--offset O] (--count N | --to-end)
//	pylog-go-client <franz|sarama> group-consume --bootstrap B --topic T --group G   (until "stop" or EOF on stdin)
//	pylog-go-client <franz|sarama> admin <create-topic|delete-topic|list-topics|describe-topic|list-groups|offsets|end-offsets> ...
//
// Every run ends with a {"type":"done",...} line; errors are {"type":"error"}
// lines and a non-zero exit status.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
)

// options are the flags of every subcommand; each uses the ones it needs.
type options struct {
	bootstrap   []string
	topic       string
	partition   int
	count       int
	start       int
	keyPrefix   string
	valuePrefix string
	acks        string
	idempotent  bool
	compression string
	offset      int64
	toEnd       bool
	group       string
	partitions  int
	replication int
	configs     configFlag
	timeout     time.Duration
	version     string
	// franz group-consume: "uniform" or "range" runs KIP-848's consumer
	// protocol with that server-side assignor; empty, the classic protocol
	serverAssignor string
}

type configFlag map[string]string

func (c configFlag) String() string { return fmt.Sprint(map[string]string(c)) }
func (c configFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("--config wants key=value, got %q", s)
	}
	c[k] = v
	return nil
}

var outMu sync.Mutex

// emit prints one JSON line; the tests read stdout line by line while a
// group member runs, so every line is written whole and at once.
func emit(kind string, fields map[string]any) {
	fields["type"] = kind
	b, err := json.Marshal(fields)
	if err != nil {
		panic(err)
	}
	outMu.Lock()
	defer outMu.Unlock()
	os.Stdout.Write(append(b, '\n'))
}

func fail(format string, args ...any) {
	emit("error", map[string]any{"error": fmt.Sprintf(format, args...)})
	os.Exit(1)
}

type library interface {
	produce(ctx context.Context, o *options) error
	consume(ctx context.Context, o *options) error
	// groupConsume polls until stop is done; ctx bounds the whole run,
	// the last commits and leaving the group included.
	groupConsume(ctx, stop context.Context, o *options) error
	admin(ctx context.Context, op string, o *options) error
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: pylog-go-client <franz|sarama> <produce|consume|group-consume|admin> [flags]")
		os.Exit(2)
	}
	var lib library
	switch os.Args[1] {
	case "franz":
		lib = franz{}
	case "sarama":
		lib = saramaLib{}
	default:
		fail("unknown library %q (franz or sarama)", os.Args[1])
	}
	cmd, args := os.Args[2], os.Args[3:]
	var op string
	if cmd == "admin" {
		if len(args) == 0 {
			fail("admin needs an operation")
		}
		op, args = args[0], args[1:]
	}

	o := &options{configs: configFlag{}}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "comma-separated seed brokers")
	fs.StringVar(&o.topic, "topic", "", "topic")
	fs.IntVar(&o.partition, "partition", -1, "partition (-1: the library's partitioner / every partition)")
	fs.IntVar(&o.count, "count", 0, "records to produce or to consume")
	fs.IntVar(&o.start, "start", 0, "index of the first produced record")
	fs.StringVar(&o.keyPrefix, "key-prefix", "key-", "key of record i is this followed by i (empty: no key)")
	fs.StringVar(&o.valuePrefix, "value-prefix", "value-", "value of record i is this followed by i")
	fs.StringVar(&o.acks, "acks", "all", "all, 1 or 0")
	fs.BoolVar(&o.idempotent, "idempotent", true, "idempotent producer (needs acks all)")
	fs.StringVar(&o.compression, "compression", "none", "none, gzip, snappy, lz4 or zstd")
	fs.Int64Var(&o.offset, "offset", -2, "first offset to consume (-2: earliest, -1: latest)")
	fs.BoolVar(&o.toEnd, "to-end", false, "consume up to the end offsets read at start")
	fs.StringVar(&o.group, "group", "", "consumer group")
	fs.IntVar(&o.partitions, "partitions", 1, "partitions of a created topic")
	fs.IntVar(&o.replication, "replication-factor", 1, "replication factor of a created topic")
	fs.Var(o.configs, "config", "topic config key=value (repeatable)")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "upper bound of the whole run")
	fs.StringVar(&o.version, "version", "3.9.0", "sarama: the Kafka version to assume (capped by ApiVersions)")
	fs.StringVar(&o.serverAssignor, "server-assignor", "", "franz group-consume: KIP-848 with this server-side assignor (uniform, range)")
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
	o.bootstrap = strings.Split(*bootstrap, ",")

	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	var err error
	switch cmd {
	case "produce":
		err = lib.produce(ctx, o)
	case "consume":
		err = lib.consume(ctx, o)
	case "group-consume":
		// A group member runs until the test says "stop" (or closes stdin):
		// then it commits, leaves the group and exits.
		stopCtx, stop := context.WithCancel(ctx)
		go func() {
			sc := bufio.NewScanner(os.Stdin)
			for sc.Scan() {
				if strings.TrimSpace(sc.Text()) == "stop" {
					break
				}
			}
			stop()
		}()
		err = lib.groupConsume(ctx, stopCtx, o)
	case "admin":
		err = lib.admin(ctx, op, o)
	default:
		fail("unknown subcommand %q", cmd)
	}
	if err != nil {
		fail("%v", err)
	}
}

func key(o *options, i int) []byte {
	if o.keyPrefix == "" {
		return nil
	}
	return []byte(fmt.Sprintf("%s%d", o.keyPrefix, i))
}

func value(o *options, i int) []byte {
	return []byte(fmt.Sprintf("%s%d", o.valuePrefix, i))
}

// nullable renders a key or value as a JSON string, or null for a null one.
func nullable(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// sortedPartitions renders owned partitions sorted, for the "owned" lines.
func sortedPartitions(m map[int32]bool) []int32 {
	out := make([]int32, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// errName is a Kafka error's name (UNKNOWN_TOPIC_OR_PARTITION, ...) whichever
// library returned it, another error's text, or nil.
func errName(err error) any {
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	var se sarama.KError
	if errors.As(err, &se) {
		if ke, ok := kerr.ErrorForCode(int16(se)).(*kerr.Error); ok {
			return ke.Message
		}
	}
	return err.Error()
}
