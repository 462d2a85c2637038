// A TypeScript producer of ddbworker envelopes: one "invoice.requested"
// message for an order. Run with Node.js >= 22.18 (it strips the types):
//
//   QUEUE_URL=https://sqs.eu-west-1.amazonaws.com/123456789012/billing \
//   ORDER_ID=42 ORDER_VERSION=7 AMOUNT_CENTS=1999 node send.ts
//
// docs/producers.md explains every field.
import { createHash, randomUUID } from "node:crypto";
import { SQSClient, SendMessageCommand, type SendMessageCommandInput } from "@aws-sdk/client-sqs";

interface InvoiceRequested {
  orderId: string;
  amountCents: number;
  currency: string;
}

const queueUrl = required("QUEUE_URL");
const orderId = process.env.ORDER_ID ?? "42";
const orderVersion = Number(process.env.ORDER_VERSION ?? "7");
const payload: InvoiceRequested = {
  orderId,
  amountCents: Number(process.env.AMOUNT_CENTS ?? "1999"),
  currency: "EUR",
};

// Endpoint and credentials come from the SDK's usual sources; an explicit
// endpoint (a local emulator) is honoured too.
const sqs = new SQSClient({ endpoint: process.env.AWS_ENDPOINT_URL_SQS || undefined });

// The idempotency key names the work in the domain's terms: "the invoice of
// order 42". A re-send of the same work carries the same key; never use a
// random value or the SQS MessageId.
const idempotencyKey = `order-${orderId}:invoice`;

function envelope(): string {
  return JSON.stringify({
    messageId: randomUUID(), // new for every send, re-sends included
    schemaVersion: 1,
    messageType: "invoice.requested",
    producer: "billing-api-ts",
    occurredAt: new Date().toISOString(), // RFC 3339 with an offset ("Z")
    idempotencyKey,
    aggregateType: "order",
    aggregateId: orderId,
    aggregateVersion: orderVersion,
    correlationId: process.env.CORRELATION_ID || undefined, // undefined members are left out
    payload,
  });
}

async function send(): Promise<string | undefined> {
  const input: SendMessageCommandInput = { QueueUrl: queueUrl, MessageBody: envelope() };
  if (queueUrl.endsWith(".fifo")) {
    // One group per aggregate keeps its messages in order. The
    // deduplication id is a function of the work, so SQS drops a re-send of
    // the same work within 5 minutes (the worker would absorb it anyway).
    input.MessageGroupId = orderId;
    input.MessageDeduplicationId = createHash("sha256")
      .update(`${idempotencyKey}\n${orderVersion}\n${JSON.stringify(payload)}`)
      .digest("hex");
  }
  const out = await sqs.send(new SendMessageCommand(input));
  return out.MessageId;
}

// The SDK retries throttling and 5xx itself. If the send still fails (or
// its outcome is unknown), send the same work again: a new messageId, the
// same idempotency key and payload. The worker applies it once.
let lastError: unknown;
for (let attempt = 1; attempt <= 3; attempt++) {
  try {
    const id = await send();
    console.log(JSON.stringify({ sent: idempotencyKey, sqsMessageId: id }));
    process.exit(0);
  } catch (err) {
    lastError = err;
    await new Promise((r) => setTimeout(r, 200 * attempt));
  }
}
console.error("send failed:", lastError);
process.exit(1);

function required(name: string): string {
  const v = process.env[name];
  if (!v) {
    console.error(`${name} is required`);
    process.exit(2);
  }
  return v;
}
