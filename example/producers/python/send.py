"""A Python producer of ddbworker envelopes: one "invoice.requested" message
for an order (boto3; Debian: apt-get install python3-boto3).

    QUEUE_URL=https://sqs.eu-west-1.amazonaws.com/123456789012/billing \\
    ORDER_ID=42 ORDER_VERSION=7 AMOUNT_CENTS=1999 python3 send.py

docs/producers.md explains every field.
"""
import hashlib
import json
import os
import sys
import time
import uuid
from datetime import datetime, timezone

import boto3
from botocore.exceptions import BotoCoreError, ClientError

queue_url = os.environ.get("QUEUE_URL") or sys.exit("QUEUE_URL is required")
order_id = os.environ.get("ORDER_ID", "42")
order_version = int(os.environ.get("ORDER_VERSION", "7"))
payload = {
    "orderId": order_id,
    "amountCents": int(os.environ.get("AMOUNT_CENTS", "1999")),
    "currency": "EUR",
}

# Endpoint and credentials come from boto3's usual sources; an explicit
# endpoint (a local emulator) is honoured too.
sqs = boto3.client("sqs", endpoint_url=os.environ.get("AWS_ENDPOINT_URL_SQS") or None)

# The idempotency key names the work in the domain's terms: "the invoice of
# order 42". A re-send of the same work carries the same key; never use a
# random value or the SQS MessageId.
idempotency_key = f"order-{order_id}:invoice"


def envelope() -> str:
    body = {
        "messageId": str(uuid.uuid4()),  # new for every send, re-sends included
        "schemaVersion": 1,
        "messageType": "invoice.requested",
        "producer": "billing-api-py",
        # RFC 3339 WITH an offset: "2026-03-01T12:00:00.512345+00:00".
        # Not datetime.utcnow().isoformat(): it has no offset and the worker
        # rejects the message (INVALID_FIELD occurredAt).
        "occurredAt": datetime.now(timezone.utc).isoformat(),
        "idempotencyKey": idempotency_key,
        "aggregateType": "order",
        "aggregateId": order_id,
        "aggregateVersion": order_version,
        "payload": payload,
    }
    if os.environ.get("CORRELATION_ID"):
        body["correlationId"] = os.environ["CORRELATION_ID"]
    # ensure_ascii=False keeps non-ASCII text as UTF-8 (fewer bytes).
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def send() -> str:
    params = {"QueueUrl": queue_url, "MessageBody": envelope()}
    if queue_url.endswith(".fifo"):
        # One group per aggregate keeps its messages in order. The
        # deduplication id is a function of the work, so SQS drops a re-send
        # of the same work within 5 minutes (the worker would absorb it anyway).
        params["MessageGroupId"] = order_id
        work = f"{idempotency_key}\n{order_version}\n{json.dumps(payload, sort_keys=True)}"
        params["MessageDeduplicationId"] = hashlib.sha256(work.encode()).hexdigest()
    return sqs.send_message(**params)["MessageId"]


# boto3 retries throttling and 5xx itself. If the send still fails (or its
# outcome is unknown), send the same work again: a new messageId, the same
# idempotency key and payload. The worker applies it once.
for attempt in range(1, 4):
    try:
        print(json.dumps({"sent": idempotency_key, "sqsMessageId": send()}))
        sys.exit(0)
    except (BotoCoreError, ClientError) as err:
        last_error = err
        time.sleep(0.2 * attempt)
sys.exit(f"send failed: {last_error}")
