// A Java producer of ddbworker envelopes: one "invoice.requested" message
// for an order (AWS SDK for Java 2.x: software.amazon.awssdk:sqs, and
// Jackson: com.fasterxml.jackson.core:jackson-databind).
//
//   QUEUE_URL=https://sqs.eu-west-1.amazonaws.com/123456789012/billing \
//   ORDER_ID=42 ORDER_VERSION=7 AMOUNT_CENTS=1999 java Send.java
//
// docs/producers.md explains every field. (Shown, not run by the tests.)
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.UUID;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.SendMessageRequest;

public final class Send {
  private static final ObjectMapper JSON = new ObjectMapper();

  public static void main(String[] args) throws Exception {
    String queueUrl = System.getenv("QUEUE_URL");
    String orderId = System.getenv().getOrDefault("ORDER_ID", "42");
    long orderVersion = Long.parseLong(System.getenv().getOrDefault("ORDER_VERSION", "7"));
    Map<String, Object> payload = new LinkedHashMap<>();
    payload.put("orderId", orderId);
    payload.put("amountCents", Long.parseLong(System.getenv().getOrDefault("AMOUNT_CENTS", "1999")));
    payload.put("currency", "EUR");

    // The idempotency key names the work in the domain's terms: "the invoice
    // of order 42". A re-send of the same work carries the same key; never
    // use a random value or the SQS MessageId.
    String idempotencyKey = "order-" + orderId + ":invoice";

    try (SqsClient sqs = SqsClient.create()) {
      SdkException last = null;
      // The SDK retries throttling and 5xx itself. If the send still fails
      // (or its outcome is unknown), send the same work again: a new
      // messageId, the same idempotency key and payload.
      for (int attempt = 1; attempt <= 3; attempt++) {
        SendMessageRequest.Builder req = SendMessageRequest.builder()
            .queueUrl(queueUrl)
            .messageBody(envelope(idempotencyKey, orderId, orderVersion, payload));
        if (queueUrl.endsWith(".fifo")) {
          // One group per aggregate keeps its messages in order; the
          // deduplication id is a function of the work.
          String work = idempotencyKey + "\n" + orderVersion + "\n" + JSON.writeValueAsString(payload);
          req.messageGroupId(orderId)
              .messageDeduplicationId(HexFormat.of().formatHex(
                  MessageDigest.getInstance("SHA-256").digest(work.getBytes(StandardCharsets.UTF_8))));
        }
        try {
          System.out.println(sqs.sendMessage(req.build()).messageId());
          return;
        } catch (SdkException e) {
          last = e;
          Thread.sleep(200L * attempt);
        }
      }
      throw last;
    }
  }

  static String envelope(String key, String orderId, long version, Map<String, Object> payload) throws Exception {
    Map<String, Object> e = new LinkedHashMap<>();
    e.put("messageId", UUID.randomUUID().toString()); // new for every send
    e.put("schemaVersion", 1);
    e.put("messageType", "invoice.requested");
    e.put("producer", "billing-api-java");
    // RFC 3339 with an offset: ISO_OFFSET_DATE_TIME, never LocalDateTime.
    e.put("occurredAt", OffsetDateTime.now(ZoneOffset.UTC).format(DateTimeFormatter.ISO_OFFSET_DATE_TIME));
    e.put("idempotencyKey", key);
    e.put("aggregateType", "order");
    e.put("aggregateId", orderId);
    e.put("aggregateVersion", version);
    e.put("payload", payload);
    return JSON.writeValueAsString(e);
  }
}
