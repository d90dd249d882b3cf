// Prints each line's voters as Kafka prints a Set<ReplicaKey> (a HashSet filled in the
// line's order), with Kafka's own ReplicaKey and Uuid classes. Input lines: id:uuid ...
// Run by tests/interop/test_java_order_kafka.py (java's source-file mode, Kafka's jars).

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import java.util.UUID;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.raft.ReplicaKey;

public class ReplicaKeySetOrder {
    public static void main(String[] args) throws Exception {
        for (String line : Files.readAllLines(Path.of(args[0]))) {
            Set<ReplicaKey> keys = new HashSet<>();
            for (String item : line.split(" ")) {
                String[] parts = item.split(":", 2);
                UUID u = UUID.fromString(parts[1]);
                Uuid directory = new Uuid(u.getMostSignificantBits(), u.getLeastSignificantBits());
                keys.add(ReplicaKey.of(Integer.parseInt(parts[0]), directory));
            }
            System.out.println(keys);
        }
    }
}
