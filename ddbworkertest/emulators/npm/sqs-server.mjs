// Serves fauxqs (an SQS emulator) on 127.0.0.1 only.
//
// fauxqs's own CLI and startFauxqs() always listen on 0.0.0.0; its exported
// buildApp does not, so we listen ourselves. The SQS store's host is left
// empty so queue URLs come out as http://127.0.0.1:PORT/000000000000/NAME.
//
// Usage: node --no-warnings sqs-server.mjs <port>
// Prints "fauxqs listening on http://127.0.0.1:PORT" once it accepts
// connections, and exits cleanly on SIGTERM or SIGINT.
import { buildApp } from "fauxqs";
// Not in the package's exports map; imported by file so buildApp's own
// module instance is the one we configure.
import { SqsStore } from "./node_modules/fauxqs/dist/sqs/sqsStore.js";

const port = Number.parseInt(process.argv[2] ?? "", 10);
if (!Number.isInteger(port) || port <= 0 || port > 65535) {
  console.error("usage: sqs-server.mjs <port>");
  process.exit(2);
}

const sqsStore = new SqsStore();
sqsStore.host = ""; // buildApp ignores a falsy host option, so set it here
const app = buildApp({ logger: false, stores: { sqsStore } });

async function stop() {
  try {
    await app.close();
  } finally {
    process.exit(0);
  }
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);

try {
  const address = await app.listen({ port, host: "127.0.0.1" });
  console.log(`fauxqs listening on ${address}`);
} catch (err) {
  console.error(`fauxqs: cannot listen on 127.0.0.1:${port}: ${err.message}`);
  process.exit(1);
}
