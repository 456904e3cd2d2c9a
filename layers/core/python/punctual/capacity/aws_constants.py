"""The AWS quotas, limits and list prices (us-east-1, on-demand, no free tiers) the capacity model
uses, each with the page it was taken from; Punctual's own figures are in ``constants``."""

from __future__ import annotations

from punctual.capacity.sourced import Kind, sourced

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
    # -- DynamoDB -------------------------------------------------------------------------------------
    *sourced(
        _DDB_PARTITIONS,
        ("ddb_partition_wru", 1_000, "WRU/s", Kind.LIMIT, "write units one partition (key value) takes"),
        ("ddb_partition_rru", 3_000, "RRU/s", Kind.LIMIT, "read units one partition takes"),
    ),
    *sourced(
        "docs/deploy.md (shards)",
        (
            "ddb_partition_utilization",
            1 / 3,
            "fraction",
            Kind.ESTIMATE,
            "share of a partition one shard may use at the peak (headroom for uneven hashing and growth)",
        ),
    ),
    *sourced(
        _DDB_WARM,
        ("ddb_warm_writes", 4_000, "WRU/s", Kind.LIMIT, "warm write throughput of a new on-demand table"),
        ("ddb_warm_reads", 12_000, "RRU/s", Kind.LIMIT, "warm read throughput of a new on-demand table"),
    ),
    *sourced(
        _DDB_ON_DEMAND,
        (
            "ddb_growth_minutes",
            30,
            "min",
            Kind.LIMIT,
            "on-demand accommodates up to double its previous peak within this many minutes",
        ),
    ),
    *sourced(
        _DDB_QUOTAS,
        ("ddb_table_quota_wru", 40_000, "WRU/s", Kind.LIMIT, "on-demand table-level write quota (table and each GSI)"),
        ("ddb_table_quota_rru", 40_000, "RRU/s", Kind.LIMIT, "on-demand table-level read quota (table and each GSI)"),
    ),
    *sourced(
        _DDB_PRICE,
        ("ddb_wru_usd", 0.625, "USD per million WRU", Kind.PRICE, "on-demand write request units"),
        ("ddb_rru_usd", 0.125, "USD per million RRU", Kind.PRICE, "on-demand read request units"),
        ("ddb_storage_usd", 0.25, "USD per GB-month", Kind.PRICE, "table storage (standard class)"),
        ("ddb_pitr_usd", 0.2, "USD per GB-month", Kind.PRICE, "continuous backups (the stack enables PITR)"),
        ("ddb_item_overhead_bytes", 100, "bytes", Kind.LIMIT, "storage overhead per item and per index entry"),
    ),
    # -- SQS ------------------------------------------------------------------------------------------
    *sourced(
        _SQS_QUOTAS,
        ("sqs_in_flight", 120_000, "messages", Kind.LIMIT, "in-flight messages per standard queue (hard limit)"),
    ),
    *sourced(
        _SQS_PRICE,
        ("sqs_request_usd", 0.4, "USD per million requests", Kind.PRICE, "standard queue requests (per 64 KiB chunk)"),
    ),
    *sourced(
        _SQS_QUOTAS,
        (
            "sqs_batch",
            10,
            "messages",
            Kind.LIMIT,
            "messages per SendMessageBatch / ReceiveMessage / DeleteMessageBatch",
        ),
    ),
    *sourced(
        "shared FACTS.md, second stage",
        (
            "sqs_idle_receives_per_s",
            3.8,
            "requests/s",
            Kind.MEASURED,
            "long-poll receives of an idle stack (counted on the wire against moto)",
        ),
    ),
    # -- Lambda ---------------------------------------------------------------------------------------
    *sourced(
        _LAMBDA_QUOTAS,
        (
            "lambda_account_concurrency",
            1_000,
            "executions",
            Kind.LIMIT,
            "default concurrent executions per account and region",
        ),
    ),
    *sourced(
        _LAMBDA_SQS,
        (
            "lambda_sqs_initial_batches",
            5,
            "concurrent batches",
            Kind.LIMIT,
            "SQS event source, standard mode: concurrency at the start of a burst",
        ),
        (
            "lambda_sqs_scale_per_min",
            300,
            "concurrency/min",
            Kind.LIMIT,
            "SQS event source, standard mode: added per minute while messages wait",
        ),
        (
            "lambda_sqs_max_concurrency",
            1_000,
            "executions",
            Kind.LIMIT,
            "SQS event source MaximumConcurrency ceiling (standard mode)",
        ),
        (
            "lambda_poller_scale_per_min",
            1_000,
            "concurrency/min",
            Kind.LIMIT,
            "provisioned mode: concurrency added per minute",
        ),
        ("lambda_poller_max_concurrency", 20_000, "executions", Kind.LIMIT, "provisioned mode: concurrency ceiling"),
        (
            "lambda_invocations_per_poller",
            10,
            "concurrent invocations",
            Kind.LIMIT,
            "what one provisioned event poller drives",
        ),
    ),
    *sourced(
        _LAMBDA_POLLERS,
        ("lambda_min_pollers_max", 200, "pollers", Kind.LIMIT, "largest MinimumPollers an SQS event source accepts"),
        ("lambda_max_pollers_max", 2_000, "pollers", Kind.LIMIT, "largest MaximumPollers an SQS event source accepts"),
    ),
    *sourced(
        LAMBDA_PRICE,
        ("lambda_gb_s_usd", 1.33334e-05, "USD per GB-second", Kind.PRICE, "Arm (Graviton) duration, first tier"),
        ("lambda_request_usd", 0.2, "USD per million invocations", Kind.PRICE, "invocation requests"),
        (
            "lambda_epu_hour_usd",
            0.185,
            "USD per EPU-hour",
            Kind.ESTIMATE,
            "provisioned event poller unit; NOT verified offline: check the Lambda pricing page",
        ),
    ),
    # -- other services -------------------------------------------------------------------------------
    *sourced(
        _FARGATE_PRICE,
        ("fargate_vcpu_hour_usd", 0.03238, "USD per vCPU-hour", Kind.PRICE, "Fargate Linux/Arm"),
        ("fargate_gb_hour_usd", 0.00356, "USD per GB-hour", Kind.PRICE, "Fargate Linux/Arm memory"),
    ),
    *sourced(
        _APIGW_PRICE,
        ("apigw_request_usd", 3.5, "USD per million requests", Kind.PRICE, "REST API requests, first tier"),
    ),
    *sourced(
        _CW_PRICE,
        ("cw_log_ingest_usd", 0.5, "USD per GB", Kind.PRICE, "CloudWatch Logs ingestion (standard)"),
        ("cw_log_store_usd", 0.03, "USD per GB-month", Kind.PRICE, "CloudWatch Logs storage"),
        ("cw_metric_usd", 0.3, "USD per metric-month", Kind.PRICE, "custom metrics (EMF), first tier"),
        ("cw_alarm_usd", 0.1, "USD per alarm-month", Kind.PRICE, "standard-resolution alarm"),
        ("cw_dashboard_usd", 3.0, "USD per dashboard-month", Kind.PRICE, "custom dashboard"),
    ),
    *sourced(
        _KMS_PRICE,
        ("kms_key_usd", 1.0, "USD per key-month", Kind.PRICE, "customer-managed key (the SNS topics' key)"),
        ("kms_request_usd", 0.03, "USD per 10,000 requests", Kind.PRICE, "KMS API requests"),
    ),
    # -- EventBridge Scheduler, the comparison --------------------------------------------------------
    *sourced(
        _EBS_PRICE,
        (
            "ebs_invocation_usd",
            1.0,
            "USD per million invocations",
            Kind.PRICE,
            "EventBridge Scheduler invocations (after 14 M free)",
        ),
    ),
    *sourced(
        _EBS_QUOTAS,
        (
            "ebs_invocations_per_s",
            1_000,
            "invocations/s",
            Kind.LIMIT,
            "EventBridge Scheduler invocation throughput (default, adjustable)",
        ),
        (
            "ebs_schedules",
            10_000_000,
            "schedules",
            Kind.LIMIT,
            "schedules per account and region (default, adjustable)",
        ),
        ("ebs_precision_s", 60, "s", Kind.LIMIT, "EventBridge Scheduler time precision (one minute)"),
    ),
)
