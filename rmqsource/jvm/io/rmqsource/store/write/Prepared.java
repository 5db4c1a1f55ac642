package io.rmqsource.store.write;

/**
 * A validated message with everything but its position encoded (put_checks.Prepared), plus the
 * position fields the append fills in (phyOffset, queueOffset, storeTimestamp) for the results
 * and dispatch.
 */
final class Prepared {
    int index;                  // position in the batch
    String topic;               // final topic (SCHEDULE_TOPIC_XXXX after the 4.9 delay rewrite)
    byte[] topicBytes;
    int queueId;
    int sysFlag;
    int size;
    boolean magicV2;
    byte[] body;
    int bodyCrc;
    byte[] props;               // stored PROPERTIES in [0, propsLen) (with the CRC placeholder when crcProp);
                                // may be PutChecks' scratch: valid only until the next prepare
    int propsLen;
    boolean crcProp;
    int flag;
    long bornTimestamp;
    byte[] bornAddr;
    int bornPort;
    byte[] storeAddr;
    int storePort;
    int reconsumeTimes;
    long preparedTransactionOffset;
    Long storeTimestamp;        // pinned by the message, or null: the writer's clock
    boolean entersCq;
    String tags;
    String keys;
    String uniqKey;
    String delay;               // only for SCHEDULE_TOPIC_XXXX records
    boolean staged;             // a staged message (not delayed): tagsCode is its ConsumeQueue tags code
    long tagsCode;
    // Filled by the append.
    long phyOffset;
    long queueOffset;
    long storeTs;
    QueueState queue;
}
