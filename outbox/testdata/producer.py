"""A Python producer writing an outbox record in the transaction that
changes its own state (docs/outbox.md). Run by relay's TestPythonProducer:

    python3 producer.py TABLE ORDER_ID VERSION MESSAGE_ID

boto3 reads the endpoint from AWS_ENDPOINT_URL_DYNAMODB.
"""
import hashlib
import json
import sys
from datetime import datetime, timezone

import boto3


def outbox_put(table, envelope, shards=16):
    pk = f"OUTBOX#{envelope['aggregateType']}#{envelope['aggregateId']}"
    seq = "V%020d" % envelope["aggregateVersion"]
    shard = int.from_bytes(hashlib.sha256(pk.encode()).digest()[:4], "big") % shards
    t = datetime.now(timezone.utc)
    now = t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)
    return {"Put": {"TableName": table, "ConditionExpression": "attribute_not_exists(PK)", "Item": {
        "PK": {"S": pk}, "SK": {"S": f"EVENT#{seq}#{envelope['messageId']}"}, "status": {"S": "PENDING"},
        "eventId": {"S": envelope["messageId"]}, "aggregateType": {"S": envelope["aggregateType"]},
        "aggregateId": {"S": envelope["aggregateId"]}, "messageType": {"S": envelope["messageType"]},
        "body": {"S": json.dumps(envelope, separators=(",", ":"))}, "createdAt": {"S": now},
        "GSI2PK": {"S": "OUTBOX#PENDING#%02d" % shard}, "GSI2SK": {"S": now}}}}


def main():
    table, order_id, version, message_id = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    envelope = {
        "messageId": message_id, "schemaVersion": 1, "messageType": "OrderShipped", "producer": "orders-py",
        "occurredAt": datetime.now(timezone.utc).isoformat(),  # with its offset: +00:00
        "idempotencyKey": f"order-{order_id}-shipped-v{version}", "aggregateType": "Order", "aggregateId": order_id,
        "aggregateVersion": version, "payload": {"orderId": order_id, "carrier": "DHL"},
    }
    ship = {"Update": {"TableName": table, "Key": {"PK": {"S": f"ORDER#{order_id}"}, "SK": {"S": "ORDER"}},
                       "UpdateExpression": "SET #s = :s, version = :v", "ConditionExpression": "version = :prev",
                       "ExpressionAttributeNames": {"#s": "state"},
                       "ExpressionAttributeValues": {":s": {"S": "SHIPPED"}, ":v": {"N": str(version)},
                                                     ":prev": {"N": str(version - 1)}}}}
    boto3.client("dynamodb").transact_write_items(TransactItems=[ship, outbox_put(table, envelope)])


if __name__ == "__main__":
    main()
