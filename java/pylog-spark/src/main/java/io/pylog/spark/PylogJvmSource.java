package io.pylog.spark;

import java.util.EnumSet;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code spark.read.format("pylog-jvm")} and {@code spark.readStream.format("pylog-jvm")}:
 * batch and micro-batch reads of Kafka-format segment files with Spark's Kafka
 * schema, decoded in the executor's JVM into columnar batches. It takes the
 * segment-file options of {@code format("pylog")} (the PySpark data source):
 * {@code path}, one of {@code subscribe}, {@code subscribePattern}, {@code assign},
 * offset ranges by offset, {@code maxOffsetsPerTrigger}; with
 * {@code kafka.bootstrap.servers} (and the {@code kafka.*} security options) the
 * broker's ListOffsets bounds the read, at the last stable offset under
 * {@code kafka.isolation.level=read_committed}, whose aborted transactions are
 * left out. It refuses the others by name.
 *
 * <p>Its short name is not {@code "pylog"}: Spark 4.0 to 4.3 resolve a format name
 * to a JVM {@code DataSourceRegister} first and to a registered Python data source
 * only when none matches, so a JVM "pylog" would hide the Python source's broker
 * reads, streaming and writes.
 */
public final class PylogJvmSource implements TableProvider, DataSourceRegister {
    static final String NAME = "pylog-jvm";

    /** Spark's Kafka schema: every field nullable, {@code headers} last when included. */
    static StructType kafkaSchema(boolean includeHeaders) {
        StructType s = new StructType()
            .add("key", DataTypes.BinaryType)
            .add("value", DataTypes.BinaryType)
            .add("topic", DataTypes.StringType)
            .add("partition", DataTypes.IntegerType)
            .add("offset", DataTypes.LongType)
            .add("timestamp", DataTypes.TimestampType)
            .add("timestampType", DataTypes.IntegerType);
        if (includeHeaders) {
            StructType header = new StructType()
                .add("key", DataTypes.StringType)
                .add("value", DataTypes.BinaryType);
            s = s.add(new StructField("headers", ArrayType.apply(header, true), true,
                org.apache.spark.sql.types.Metadata.empty()));
        }
        return s;
    }

    @Override
    public String shortName() {
        return NAME;
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        // the options are checked here, when the DataFrame is loaded
        return kafkaSchema(ReadOptions.parse(options).includeHeaders);
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new PylogTable(ReadOptions.parse(properties));
    }

    static final class PylogTable implements SupportsRead {
        private final ReadOptions options;

        PylogTable(ReadOptions options) {
            this.options = options;
        }

        @Override
        public String name() {
            return NAME + " " + options.paths;
        }

        // deprecated for columns() since Spark 3.4, whose default derives the columns from it
        @Override
        @SuppressWarnings("deprecation")
        public StructType schema() {
            return kafkaSchema(options.includeHeaders);
        }

        @Override
        public Set<TableCapability> capabilities() {
            return EnumSet.of(TableCapability.BATCH_READ, TableCapability.MICRO_BATCH_READ);
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap ignored) {
            return new SegmentScan.Builder(options);
        }
    }
}
