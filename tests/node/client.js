// kafkajs behind a small CLI for pylog's integration tests
// (tests/integration/test_node_clients.py), printing one JSON object per line.
// Its packages are installed by `make node-client` into a cache outside the
// repository and found through NODE_PATH.
//
//   node client.js produce       --bootstrap B --topic T --count N [--partition P] [--acks -1|1|0] [--idempotent false] [--compression gzip]
//   node client.js consume       --bootstrap B --topic T [--partition P] [--offset O] (--count N | --to-end)
//   node client.js group-consume --bootstrap B --topic T --group G   (until "stop" or EOF on stdin)
//   node client.js admin <create-topic|delete-topic|list-topics|describe-topic|list-groups|offsets|end-offsets> ...
//
// Every run ends with a {"type":"done",...} line; a failure is an
// {"type":"error"} line and exit status 1.
'use strict'

const { Kafka, CompressionTypes, logLevel } = require('kafkajs')
const readline = require('readline')

function emit (type, fields = {}) {
  process.stdout.write(JSON.stringify({ type, ...fields }) + '\n')
}

function parseArgs (argv) {
  const o = {
    bootstrap: '127.0.0.1:9092', topic: '', partition: -1, count: 0, start: 0,
    keyPrefix: 'key-', valuePrefix: 'value-', acks: -1, idempotent: true,
    compression: 'none', offset: -2, toEnd: false, group: '', partitions: 1,
    replicationFactor: 1, config: {}, timeout: 60000, retries: 5
  }
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s, 2)
    const takesValue = !['--to-end'].includes(flag)
    const val = takesValue ? (inline !== undefined ? inline : argv[++i]) : 'true'
    switch (flag) {
      case '--bootstrap': o.bootstrap = val; break
      case '--topic': o.topic = val; break
      case '--partition': o.partition = Number(val); break
      case '--count': o.count = Number(val); break
      case '--start': o.start = Number(val); break
      case '--key-prefix': o.keyPrefix = val; break
      case '--value-prefix': o.valuePrefix = val; break
      case '--acks': o.acks = val === 'all' ? -1 : Number(val); break
      case '--idempotent': o.idempotent = val !== 'false'; break
      case '--compression': o.compression = val; break
      case '--offset': o.offset = Number(val); break
      case '--to-end': o.toEnd = true; break
      case '--group': o.group = val; break
      case '--partitions': o.partitions = Number(val); break
      case '--replication-factor': o.replicationFactor = Number(val); break
      case '--config': { const [k, v] = val.split(/=(.*)/s, 2); o.config[k] = v; break }
      case '--timeout': o.timeout = Number(val) * 1000; break
      case '--retries': o.retries = Number(val); break
      default: throw new Error(`unknown flag ${flag}`)
    }
  }
  return o
}

function kafka (o) {
  // kafkajs logs through a creator; its lines go to stderr, the test's log file.
  const logCreator = () => ({ namespace, level, log }) => {
    const { message, ...extra } = log
    process.stderr.write(`${level} [${namespace}] ${message} ${JSON.stringify(extra)}\n`)
  }
  return new Kafka({
    clientId: 'pylog-node-kafkajs',
    brokers: o.bootstrap.split(','),
    logLevel: logLevel.INFO,
    logCreator,
    retry: { retries: o.retries }
  })
}

// A Kafka error's name (kafkajs calls it `type`), also inside aggregates.
function errName (err) {
  if (!err) return null
  if (err.errors && err.errors.length) return errName(err.errors[0])
  if (err.type) return err.type
  if (err.cause) return errName(err.cause) // retries exhausted: the last error
  return String(err.message || err)
}

function record (topic, partition, m) {
  const headers = {}
  for (const [k, v] of Object.entries(m.headers || {})) headers[k] = v === null ? null : v.toString()
  return {
    topic,
    partition,
    offset: Number(m.offset),
    key: m.key === null ? null : m.key.toString(),
    value: m.value === null ? null : m.value.toString(),
    headers,
    timestamp: Number(m.timestamp)
  }
}

async function produce (o) {
  const compression = {
    none: CompressionTypes.None, gzip: CompressionTypes.GZIP
  }[o.compression]
  if (compression === undefined) throw new Error(`unsupported compression ${o.compression}`)
  const idempotent = o.idempotent && o.acks === -1
  // The idempotent producer needs one request in flight.
  const producer = kafka(o).producer({
    idempotent, maxInFlightRequests: idempotent ? 1 : undefined, allowAutoTopicCreation: false
  })
  await producer.connect()
  const messages = []
  for (let i = o.start; i < o.start + o.count; i++) {
    const m = { value: `${o.valuePrefix}${i}`, headers: { index: String(i) } }
    if (o.keyPrefix) m.key = `${o.keyPrefix}${i}`
    if (o.partition >= 0) m.partition = o.partition
    messages.push(m)
  }
  // One send per 100 records: each answers a base offset per partition.
  let acked = 0
  for (let b = 0; b < messages.length; b += 100) {
    const batch = messages.slice(b, b + 100)
    const results = await producer.send({ topic: o.topic, acks: o.acks, compression, messages: batch })
    for (const r of results) {
      emit('sent', { partition: r.partition, baseOffset: Number(r.baseOffset), error: r.errorCode })
    }
    acked += batch.length
  }
  await producer.disconnect()
  emit('done', { acked, failed: 0 })
}

async function endOffsets (o) {
  const admin = kafka(o).admin()
  await admin.connect()
  try {
    const listed = await admin.fetchTopicOffsets(o.topic)
    const ends = {}
    for (const p of listed) ends[p.partition] = Number(p.high)
    return ends
  } finally {
    await admin.disconnect()
  }
}

// kafkajs consumes only through a group: `consume` uses a group of its own,
// seeks each wanted partition to --offset and stops at the end offsets read
// first (--to-end) or after --count records. It commits nothing.
async function consume (o) {
  const ends = await endOffsets(o)
  const wanted = Object.keys(ends).map(Number).filter(p => o.partition < 0 || p === o.partition)
  if (wanted.length === 0) throw new Error(`topic ${o.topic} has no partition ${o.partition}`)
  const next = {}
  for (const p of wanted) next[p] = o.offset >= 0 ? o.offset : (o.offset === -1 ? ends[p] : 0)
  const finished = (count) => o.toEnd ? wanted.every(p => next[p] >= ends[p]) : count >= o.count

  const consumer = kafka(o).consumer({ groupId: `pylog-node-assign-${process.pid}-${Date.now()}` })
  await consumer.connect()
  await consumer.subscribe({ topic: o.topic, fromBeginning: true })
  let count = 0
  let resolveDone
  const done = new Promise(resolve => { resolveDone = resolve })
  if (finished(count)) resolveDone()
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ topic, partition, message }) => {
      if (!wanted.includes(partition) || finished(count)) return
      if (o.offset >= 0 && Number(message.offset) < o.offset) return
      count++
      next[partition] = Number(message.offset) + 1
      emit('record', record(topic, partition, message))
      if (finished(count)) resolveDone()
    }
  })
  if (o.offset >= 0) {
    for (const p of wanted) consumer.seek({ topic: o.topic, partition: p, offset: String(o.offset) })
  }
  const timer = setTimeout(resolveDone, o.timeout)
  await done
  clearTimeout(timer)
  await consumer.disconnect()
  emit('done', { count, complete: finished(count) })
}

// A group member: prints each assignment, every record, and commits each
// record's offset before taking the next, until "stop" on stdin.
async function groupConsume (o) {
  const consumer = kafka(o).consumer({ groupId: o.group })
  let owned = []
  consumer.on(consumer.events.GROUP_JOIN, e => {
    owned = (e.payload.memberAssignment[o.topic] || []).slice().sort((a, b) => a - b)
    emit('assigned', { partitions: owned })
    emit('owned', { partitions: owned })
  })
  consumer.on(consumer.events.REBALANCING, () => {
    // kafkajs's eager protocol gives everything back at each rebalance.
    emit('revoked', { partitions: owned })
    owned = []
    emit('owned', { partitions: owned })
  })
  consumer.on(consumer.events.CRASH, e => {
    emit('group-error', { error: errName(e.payload.error), restart: e.payload.restart })
  })
  await consumer.connect()
  await consumer.subscribe({ topic: o.topic, fromBeginning: true })
  let count = 0
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ topic, partition, message }) => {
      count++
      emit('record', record(topic, partition, message))
      const offset = String(Number(message.offset) + 1)
      try {
        await consumer.commitOffsets([{ topic, partition, offset }])
        emit('committed', { offsets: { [partition]: Number(offset) } })
      } catch (err) {
        emit('commit-error', { error: errName(err) })
      }
    }
  })
  await waitForStop(o.timeout)
  // disconnect leaves the group (LeaveGroup), so the others rebalance at once.
  await consumer.disconnect()
  emit('done', { count })
}

function waitForStop (timeout) {
  return new Promise(resolve => {
    const timer = setTimeout(resolve, timeout)
    const rl = readline.createInterface({ input: process.stdin })
    const finish = () => { clearTimeout(timer); rl.close(); resolve() }
    rl.on('line', line => { if (line.trim() === 'stop') finish() })
    rl.on('close', finish)
  })
}

async function admin (op, o) {
  const adm = kafka(o).admin()
  await adm.connect()
  try {
    switch (op) {
      case 'create-topic': {
        // kafkajs answers false, not an error, for a topic that exists.
        let error = null
        let created = false
        try {
          created = await adm.createTopics({
            waitForLeaders: true,
            topics: [{
              topic: o.topic,
              numPartitions: o.partitions,
              replicationFactor: o.replicationFactor,
              configEntries: Object.entries(o.config).map(([name, value]) => ({ name, value }))
            }]
          })
        } catch (err) {
          error = errName(err)
        }
        emit('created', { topic: o.topic, created, error })
        break
      }
      case 'delete-topic': {
        let error = null
        try {
          await adm.deleteTopics({ topics: [o.topic] })
        } catch (err) {
          error = errName(err)
        }
        emit('deleted', { topic: o.topic, error })
        break
      }
      case 'list-topics':
        emit('topics', { topics: (await adm.listTopics()).sort() })
        break
      case 'describe-topic': {
        const meta = await adm.fetchTopicMetadata({ topics: [o.topic] })
        const out = {}
        for (const t of meta.topics) {
          out[t.name] = {
            partitions: t.partitions.map(p => ({
              partition: p.partitionId, leader: p.leader, replicas: p.replicas, isr: p.isr,
              error: p.partitionErrorCode || null
            })).sort((a, b) => a.partition - b.partition)
          }
        }
        emit('topics', { topics: out })
        break
      }
      case 'list-groups': {
        const out = {}
        for (const g of (await adm.listGroups()).groups) out[g.groupId] = { protocolType: g.protocolType }
        emit('groups', { groups: out })
        break
      }
      case 'offsets': {
        const out = {}
        for (const t of await adm.fetchOffsets({ groupId: o.group, topics: [o.topic] })) {
          for (const p of t.partitions) out[p.partition] = Number(p.offset)
        }
        emit('offsets', { group: o.group, offsets: out, error: null })
        break
      }
      case 'end-offsets':
        emit('end-offsets', { topic: o.topic, offsets: await endOffsets(o) })
        break
      default:
        throw new Error(`unknown admin operation ${op}`)
    }
  } finally {
    await adm.disconnect()
  }
  emit('done')
}

async function main () {
  const [cmd, ...rest] = process.argv.slice(2)
  let op
  let args = rest
  if (cmd === 'admin') [op, ...args] = rest
  const o = parseArgs(args)
  switch (cmd) {
    case 'produce': return produce(o)
    case 'consume': return consume(o)
    case 'group-consume': return groupConsume(o)
    case 'admin': return admin(op, o)
    default: throw new Error(`unknown subcommand ${cmd}`)
  }
}

main().then(
  () => process.exit(0),
  err => { emit('error', { error: errName(err), stack: String(err.stack) }); process.exit(1) }
)
