#!/bin/bash
# LocalStack READY hook: creates what ddbworker needs, as `ddbworker tables create`
# and `ddbworker queues create` would with their defaults:
#
#   DynamoDB table ddbworker   keys PK/SK, GSI1 and GSI2 (KEYS_ONLY), on demand,
#                              TTL on attribute "ttl"          (tables.Definition)
#   SQS queue ddbworker-work-dlq   retention 14 days
#   SQS queue ddbworker-work       visibility 30 s, retention 4 days, redrive to
#                                  the DLQ after 10 receives   (worker.QueueConfig)
#
# Idempotent: existing resources are kept (the table) or brought back to these
# attributes (the queues), so the hook can be run again by hand:
#   docker compose exec localstack /etc/localstack/init/ready.d/10-ddbworker.sh
#
# docker-compose.yml mounts ./localstack read-only at /etc/localstack/ddbworker:
# table.json lives there, not in ready.d, where LocalStack would try to run it.
# internal/dev/cmd/ddbworker-dev/compose_test.go runs this script with a fake awslocal and checks
# every call against tables.Definition and worker.CreateQueues: keep each
# resource's name literal in its call.
set -euo pipefail
# Also stop on a failure inside $(...): ensure_queue runs in one.
shopt -s inherit_errexit

config_dir=/etc/localstack/ddbworker

log() { echo "ddbworker init: $*"; }

# --- table --------------------------------------------------------------------
if awslocal dynamodb describe-table --table-name ddbworker >/dev/null 2>&1; then
  log "table ddbworker exists"
else
  awslocal dynamodb create-table --cli-input-json "file://${config_dir}/table.json" >/dev/null
  log "table ddbworker created"
fi
awslocal dynamodb wait table-exists --table-name ddbworker

ttl_status=$(awslocal dynamodb describe-time-to-live --table-name ddbworker \
  --query TimeToLiveDescription.TimeToLiveStatus --output text)
if [[ "$ttl_status" != ENABLED && "$ttl_status" != ENABLING ]]; then
  awslocal dynamodb update-time-to-live --table-name ddbworker \
    --time-to-live-specification '{"Enabled": true, "AttributeName": "ttl"}' >/dev/null
  log "TTL enabled on ttl"
fi

# --- queues -------------------------------------------------------------------
# ensure_queue NAME ATTRIBUTES_JSON prints the queue's URL. CreateQueue is only
# idempotent while the attributes are unchanged, so an existing queue gets its
# attributes set instead.
ensure_queue() {
  local name=$1 attributes=$2 url
  if url=$(awslocal sqs get-queue-url --queue-name "$name" --query QueueUrl --output text 2>/dev/null); then
    awslocal sqs set-queue-attributes --queue-url "$url" --attributes "$attributes" >/dev/null
    log "queue $name exists: attributes set" >&2
  else
    url=$(awslocal sqs create-queue --queue-name "$name" --attributes "$attributes" \
      --query QueueUrl --output text)
    log "queue $name created" >&2
  fi
  echo "$url"
}

dlq_url=$(ensure_queue ddbworker-work-dlq '{"MessageRetentionPeriod": "1209600"}')
dlq_arn=$(awslocal sqs get-queue-attributes --queue-url "$dlq_url" \
  --attribute-names QueueArn --query Attributes.QueueArn --output text)

redrive_policy="{\"deadLetterTargetArn\": \"${dlq_arn}\", \"maxReceiveCount\": \"10\"}"
# RedrivePolicy is a JSON document inside a JSON string: escape its quotes.
redrive_policy=${redrive_policy//\"/\\\"}
work_url=$(ensure_queue ddbworker-work \
  '{"VisibilityTimeout": "30", "MessageRetentionPeriod": "345600", "RedrivePolicy": "'"$redrive_policy"'"}')

log "ready: table ddbworker, queue $work_url, DLQ $dlq_url"
