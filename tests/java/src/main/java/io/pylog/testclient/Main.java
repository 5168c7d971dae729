package io.pylog.testclient;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ExecutionException;

/**
 * The Java Kafka client driven from pylog's Python tests: one subcommand per run,
 * its results printed as one JSON object per line on stdout.
 *
 * <pre>
 * produce  --bootstrap B --topic T (--count N | --stdin) [--acks all|1|0] [--idempotence true|false]
 *          [--partition P] [--key-prefix K] [--value-prefix V] [--headers] [--sync] [--property k=v]...
 * consume  --bootstrap B --topic T (--group G | --assign P[,P...]) [--count N] [--to-end]
 *          [--offset O] [--timeout-ms MS] [--property k=v]...
 * admin    --bootstrap B (create-topic --topic T [--partitions P] [--replication-factor R] [--config k=v]...
 *          | describe-topic --topic T[,T...] | delete-topic --topic T[,T...] | list-topics
 *          | describe-cluster | describe-configs --topic T)
 * txn      produce | transform | fence | hold (see TxnCommand.java)
 * </pre>
 *
 * Every line has a "type"; the last is {"type":"done",...} or {"type":"error",...}. The exit
 * status is 0 when the command did all it was asked, 1 when the cluster said no, 2 on bad usage.
 */
public final class Main {
    private static final PrintStream OUT =
            new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);

    private Main() {}

    /** One line of JSON, whole: callbacks on the client's I/O thread print too. */
    static synchronized void emit(Map<String, Object> line) {
        OUT.println(Json.write(line));
    }

    static Map<String, Object> error(Throwable t) {
        Throwable cause = t;
        while ((cause instanceof ExecutionException) && cause.getCause() != null) {
            cause = cause.getCause();
        }
        return Json.obj("type", "error", "error", cause.getClass().getSimpleName(),
                "message", String.valueOf(cause.getMessage()));
    }

    public static void main(String[] argv) {
        if (argv.length == 0) {
            System.err.println("usage: produce | consume | admin (see Main.java)");
            System.exit(2);
        }
        int status;
        try {
            Args args = new Args(argv, 1);
            status = switch (argv[0]) {
                case "produce" -> new ProduceCommand(args).run();
                case "consume" -> new ConsumeCommand(args).run();
                case "admin" -> new AdminCommand(args).run();
                case "share-consume" -> new ShareConsumeCommand(args).run();
                case "txn" -> new TxnCommand(args).run();
                default -> throw new Args.UsageException("unknown command " + argv[0]);
            };
        } catch (Args.UsageException | NumberFormatException e) {
            System.err.println("usage: " + e.getMessage());
            status = 2;
        } catch (Exception e) {
            emit(error(e));
            status = 1;
        }
        OUT.flush();
        System.exit(status);
    }
}
