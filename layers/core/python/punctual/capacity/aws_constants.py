"""The AWS quotas, limits and list prices (us-east-1, on-demand, no free tiers) the capacity model
uses, each with the page it was taken from; Punctual's own figures are in ``constants``."""

from __future__ import annotations

from punctual.capacity.sourced import AS_OF, Constant, Kind

_DDB_QUOTAS = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html"
_DDB_PARTITIONS = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html"
_DDB_WARM = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput.html"
_DDB_ON_DEMAND = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/on-demand-capacity-mode.html"
_DDB_PRICE = "https://aws.amazon.com/dynamodb/pricing/on-demand/"
_SQS_QUOTAS = "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html"
_SQS_PRICE = "https://aws.amazon.com/sqs/pricing/"
_LAMBDA_SQS = "https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html"
_LAMBDA_POLLERS = "https://docs.aws.amazon.com/lambda/latest/api/API_ProvisionedPollerConfig.html"
_LAMBDA_QUOTAS = "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html"
LAMBDA_PRICE = "https://aws.amazon.com/lambda/pricing/"
_FARGATE_PRICE = "https://aws.amazon.com/fargate/pricing/"
_APIGW_PRICE = "https://aws.amazon.com/api-gateway/pricing/"
_CW_PRICE = "https://aws.amazon.com/cloudwatch/pricing/"
_KMS_PRICE = "https://aws.amazon.com/kms/pricing/"
_EBS_QUOTAS = "https://docs.aws.amazon.com/scheduler/latest/UserGuide/scheduler-quotas.html"
_EBS_PRICE = "https://aws.amazon.com/eventbridge/pricing/"

AWS_CONSTANTS = (
    # -- DynamoDB ---------------------------------------------------------------------------------
    Constant(
        "ddb_partition_wru",
        1_000,
        "WRU/s",
        Kind.LIMIT,
        "write units one partition (key value) takes",
        _DDB_PARTITIONS,
        AS_OF,
    ),
    Constant("ddb_partition_rru", 3_000, "RRU/s", Kind.LIMIT, "read units one partition takes", _DDB_PARTITIONS, AS_OF),
    Constant(
        "ddb_partition_utilization",
        1 / 3,
        "fraction",
        Kind.ESTIMATE,
        "share of a partition one shard may use at the peak (headroom for uneven hashing and growth)",
        "docs/deploy.md (shards)",
        AS_OF,
    ),
    Constant(
        "ddb_warm_writes",
        4_000,
        "WRU/s",
        Kind.LIMIT,
        "warm write throughput of a new on-demand table",
        _DDB_WARM,
        AS_OF,
    ),
    Constant(
        "ddb_warm_reads", 12_000, "RRU/s", Kind.LIMIT, "warm read throughput of a new on-demand table", _DDB_WARM, AS_OF
    ),
    Constant(
        "ddb_growth_minutes",
        30,
        "min",
        Kind.LIMIT,
        "on-demand accommodates up to double its previous peak within this many minutes",
        _DDB_ON_DEMAND,
        AS_OF,
    ),
    Constant(
        "ddb_table_quota_wru",
        40_000,
        "WRU/s",
        Kind.LIMIT,
        "on-demand table-level write quota (table and each GSI)",
        _DDB_QUOTAS,
        AS_OF,
    ),
    Constant(
        "ddb_table_quota_rru",
        40_000,
        "RRU/s",
        Kind.LIMIT,
        "on-demand table-level read quota (table and each GSI)",
        _DDB_QUOTAS,
        AS_OF,
    ),
    Constant(
        "ddb_wru_usd", 0.625, "USD per million WRU", Kind.PRICE, "on-demand write request units", _DDB_PRICE, AS_OF
    ),
    Constant(
        "ddb_rru_usd", 0.125, "USD per million RRU", Kind.PRICE, "on-demand read request units", _DDB_PRICE, AS_OF
    ),
    Constant(
        "ddb_storage_usd", 0.25, "USD per GB-month", Kind.PRICE, "table storage (standard class)", _DDB_PRICE, AS_OF
    ),
    Constant(
        "ddb_pitr_usd",
        0.20,
        "USD per GB-month",
        Kind.PRICE,
        "continuous backups (the stack enables PITR)",
        _DDB_PRICE,
        AS_OF,
    ),
    Constant(
        "ddb_item_overhead_bytes",
        100,
        "bytes",
        Kind.LIMIT,
        "storage overhead per item and per index entry",
        _DDB_PRICE,
        AS_OF,
    ),
    # -- SQS --------------------------------------------------------------------------------------
    Constant(
        "sqs_in_flight",
        120_000,
        "messages",
        Kind.LIMIT,
        "in-flight messages per standard queue (hard limit)",
        _SQS_QUOTAS,
        AS_OF,
    ),
    Constant(
        "sqs_request_usd",
        0.40,
        "USD per million requests",
        Kind.PRICE,
        "standard queue requests (per 64 KiB chunk)",
        _SQS_PRICE,
        AS_OF,
    ),
    Constant(
        "sqs_batch",
        10,
        "messages",
        Kind.LIMIT,
        "messages per SendMessageBatch / ReceiveMessage / DeleteMessageBatch",
        _SQS_QUOTAS,
        AS_OF,
    ),
    Constant(
        "sqs_idle_receives_per_s",
        3.8,
        "requests/s",
        Kind.MEASURED,
        "long-poll receives of an idle stack (counted on the wire against moto)",
        "shared FACTS.md, second stage",
        AS_OF,
    ),
    # -- Lambda -----------------------------------------------------------------------------------
    Constant(
        "lambda_account_concurrency",
        1_000,
        "executions",
        Kind.LIMIT,
        "default concurrent executions per account and region",
        _LAMBDA_QUOTAS,
        AS_OF,
    ),
    Constant(
        "lambda_sqs_initial_batches",
        5,
        "concurrent batches",
        Kind.LIMIT,
        "SQS event source, standard mode: concurrency at the start of a burst",
        _LAMBDA_SQS,
        AS_OF,
    ),
    Constant(
        "lambda_sqs_scale_per_min",
        300,
        "concurrency/min",
        Kind.LIMIT,
        "SQS event source, standard mode: added per minute while messages wait",
        _LAMBDA_SQS,
        AS_OF,
    ),
    Constant(
        "lambda_sqs_max_concurrency",
        1_000,
        "executions",
        Kind.LIMIT,
        "SQS event source MaximumConcurrency ceiling (standard mode)",
        _LAMBDA_SQS,
        AS_OF,
    ),
    Constant(
        "lambda_poller_scale_per_min",
        1_000,
        "concurrency/min",
        Kind.LIMIT,
        "provisioned mode: concurrency added per minute",
        _LAMBDA_SQS,
        AS_OF,
    ),
    Constant(
        "lambda_poller_max_concurrency",
        20_000,
        "executions",
        Kind.LIMIT,
        "provisioned mode: concurrency ceiling",
        _LAMBDA_SQS,
        AS_OF,
    ),
    Constant(
        "lambda_invocations_per_poller",
        10,
        "concurrent invocations",
        Kind.LIMIT,
        "what one provisioned event poller drives",
        _LAMBDA_SQS,
        AS_OF,
    ),
    Constant(
        "lambda_min_pollers_max",
        200,
        "pollers",
        Kind.LIMIT,
        "largest MinimumPollers an SQS event source accepts",
        _LAMBDA_POLLERS,
        AS_OF,
    ),
    Constant(
        "lambda_max_pollers_max",
        2_000,
        "pollers",
        Kind.LIMIT,
        "largest MaximumPollers an SQS event source accepts",
        _LAMBDA_POLLERS,
        AS_OF,
    ),
    Constant(
        "lambda_gb_s_usd",
        0.0000133334,
        "USD per GB-second",
        Kind.PRICE,
        "Arm (Graviton) duration, first tier",
        LAMBDA_PRICE,
        AS_OF,
    ),
    Constant(
        "lambda_request_usd",
        0.20,
        "USD per million invocations",
        Kind.PRICE,
        "invocation requests",
        LAMBDA_PRICE,
        AS_OF,
    ),
    Constant(
        "lambda_epu_hour_usd",
        0.185,
        "USD per EPU-hour",
        Kind.ESTIMATE,
        "provisioned event poller unit; NOT verified offline: check the Lambda pricing page",
        LAMBDA_PRICE,
        AS_OF,
    ),
    # -- other services ---------------------------------------------------------------------------
    Constant(
        "fargate_vcpu_hour_usd", 0.03238, "USD per vCPU-hour", Kind.PRICE, "Fargate Linux/Arm", _FARGATE_PRICE, AS_OF
    ),
    Constant(
        "fargate_gb_hour_usd", 0.00356, "USD per GB-hour", Kind.PRICE, "Fargate Linux/Arm memory", _FARGATE_PRICE, AS_OF
    ),
    Constant(
        "apigw_request_usd",
        3.50,
        "USD per million requests",
        Kind.PRICE,
        "REST API requests, first tier",
        _APIGW_PRICE,
        AS_OF,
    ),
    Constant(
        "cw_log_ingest_usd", 0.50, "USD per GB", Kind.PRICE, "CloudWatch Logs ingestion (standard)", _CW_PRICE, AS_OF
    ),
    Constant("cw_log_store_usd", 0.03, "USD per GB-month", Kind.PRICE, "CloudWatch Logs storage", _CW_PRICE, AS_OF),
    Constant(
        "cw_metric_usd", 0.30, "USD per metric-month", Kind.PRICE, "custom metrics (EMF), first tier", _CW_PRICE, AS_OF
    ),
    Constant("cw_alarm_usd", 0.10, "USD per alarm-month", Kind.PRICE, "standard-resolution alarm", _CW_PRICE, AS_OF),
    Constant("cw_dashboard_usd", 3.00, "USD per dashboard-month", Kind.PRICE, "custom dashboard", _CW_PRICE, AS_OF),
    Constant(
        "kms_key_usd",
        1.00,
        "USD per key-month",
        Kind.PRICE,
        "customer-managed key (the SNS topics' key)",
        _KMS_PRICE,
        AS_OF,
    ),
    Constant("kms_request_usd", 0.03, "USD per 10,000 requests", Kind.PRICE, "KMS API requests", _KMS_PRICE, AS_OF),
    # -- EventBridge Scheduler, the comparison ----------------------------------------------------
    Constant(
        "ebs_invocation_usd",
        1.00,
        "USD per million invocations",
        Kind.PRICE,
        "EventBridge Scheduler invocations (after 14 M free)",
        _EBS_PRICE,
        AS_OF,
    ),
    Constant(
        "ebs_invocations_per_s",
        1_000,
        "invocations/s",
        Kind.LIMIT,
        "EventBridge Scheduler invocation throughput (default, adjustable)",
        _EBS_QUOTAS,
        AS_OF,
    ),
    Constant(
        "ebs_schedules",
        10_000_000,
        "schedules",
        Kind.LIMIT,
        "schedules per account and region (default, adjustable)",
        _EBS_QUOTAS,
        AS_OF,
    ),
    Constant(
        "ebs_precision_s", 60, "s", Kind.LIMIT, "EventBridge Scheduler time precision (one minute)", _EBS_QUOTAS, AS_OF
    ),
)
