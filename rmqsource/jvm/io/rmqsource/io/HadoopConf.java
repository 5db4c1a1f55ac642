package io.rmqsource.io;

import java.io.IOException;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.io.Serializable;
import org.apache.hadoop.conf.Configuration;

/**
 * The session's Hadoop configuration (spark.hadoop.*, per-bucket fs.s3a.bucket.* keys, credentials)
 * carried to the executors: Configuration is Writable, not Serializable, so it travels as its
 * write/readFields form (broadcast once per scan).
 */
public final class HadoopConf implements Serializable {
    private static final long serialVersionUID = 1L;
    private transient Configuration conf;

    public HadoopConf(Configuration conf) {
        this.conf = conf;
    }

    public Configuration get() {
        return conf;
    }

    private void writeObject(ObjectOutputStream out) throws IOException {
        out.defaultWriteObject();
        conf.write(out);
    }

    private void readObject(ObjectInputStream in) throws IOException, ClassNotFoundException {
        in.defaultReadObject();
        conf = new Configuration(false);
        conf.readFields(in);
    }
}
