"""What a view's SQL may use, by Spark 4.0's own names: plan nodes and built-in functions.

An allowlist, not a denylist: Spark grows new ways out of a query with each
release (EXECUTE IMMEDIATE, IDENTIFIER(), table-valued functions), and a name
this list does not hold is refused by that name. The function list is Spark
4.0's FunctionRegistry less what reaches the JVM, reads files or parses XML
(external entities); the job keeps an identical copy
(spark_templates/dvjob/sql/allowlist.py; a unit test holds the two equal).
"""

from __future__ import annotations

FUNCTIONS = frozenset({
    "abs", "acos", "acosh", "add_months", "aes_decrypt", "aes_encrypt", "aggregate", "and",
    "any", "any_value", "approx_count_distinct", "approx_percentile", "array", "array_agg",
    "array_append", "array_compact", "array_contains", "array_distinct", "array_except",
    "array_insert", "array_intersect", "array_join", "array_max", "array_min", "array_position",
    "array_prepend", "array_remove", "array_repeat", "array_size", "array_sort", "array_union",
    "arrays_overlap", "arrays_zip", "ascii", "asin", "asinh", "assert_true", "atan", "atan2",
    "atanh", "avg", "base64", "between", "bigint", "bin", "binary", "bit_and", "bit_count",
    "bit_get", "bit_length", "bit_or", "bit_xor", "bitmap_bit_position", "bitmap_bucket_number",
    "bitmap_construct_agg", "bitmap_count", "bitmap_or_agg", "bool_and", "bool_or", "boolean",
    "bround", "btrim", "cardinality", "cast", "cbrt", "ceil", "ceiling", "char", "char_length",
    "character_length", "chr", "coalesce", "collate", "collation", "collect_list", "collect_set",
    "concat", "concat_ws", "contains", "conv", "convert_timezone", "corr", "cos", "cosh", "cot",
    "count", "count_if", "count_min_sketch", "covar_pop", "covar_samp", "crc32", "csc",
    "cume_dist", "curdate", "current_catalog", "current_database", "current_date",
    "current_schema", "current_timestamp", "current_timezone", "current_user", "date",
    "date_add", "date_diff", "date_format", "date_from_unix_date", "date_part", "date_sub",
    "date_trunc", "dateadd", "datediff", "datepart", "day", "dayname", "dayofmonth", "dayofweek",
    "dayofyear", "decimal", "decode", "degrees", "dense_rank", "div", "double", "e",
    "element_at", "elt", "encode", "endswith", "equal_null", "every", "exists", "exp", "explode",
    "explode_outer", "expm1", "extract", "factorial", "filter", "find_in_set", "first",
    "first_value", "flatten", "float", "floor", "forall", "format_number", "format_string",
    "from_csv", "from_json", "from_unixtime", "from_utc_timestamp", "get", "get_json_object",
    "getbit", "greatest", "grouping", "grouping_id", "hash", "hex", "histogram_numeric",
    "hll_sketch_agg", "hll_sketch_estimate", "hll_union", "hll_union_agg", "hour", "hypot", "if",
    "ifnull", "ilike", "in", "initcap", "inline", "inline_outer", "instr", "int",
    "is_valid_utf8", "is_variant_null", "isnan", "isnotnull", "isnull", "json_array_length",
    "json_object_keys", "json_tuple", "kurtosis", "lag", "last", "last_day", "last_value",
    "lcase", "lead", "least", "left", "len", "length", "levenshtein", "like", "listagg", "ln",
    "localtimestamp", "locate", "log", "log10", "log1p", "log2", "lower", "lpad", "ltrim",
    "luhn_check", "make_date", "make_dt_interval", "make_interval", "make_timestamp",
    "make_timestamp_ltz", "make_timestamp_ntz", "make_valid_utf8", "make_ym_interval", "map",
    "map_concat", "map_contains_key", "map_entries", "map_filter", "map_from_arrays",
    "map_from_entries", "map_keys", "map_values", "map_zip_with", "mask", "max", "max_by", "md5",
    "mean", "median", "min", "min_by", "minute", "mod", "mode", "monotonically_increasing_id",
    "month", "monthname", "months_between", "named_struct", "nanvl", "negative", "next_day",
    "not", "now", "nth_value", "ntile", "nullif", "nullifzero", "nvl", "nvl2", "octet_length",
    "or", "overlay", "parse_json", "parse_url", "percent_rank", "percentile",
    "percentile_approx", "percentile_cont", "percentile_disc", "pi", "pmod", "posexplode",
    "posexplode_outer", "position", "positive", "pow", "power", "printf", "quarter", "radians",
    "raise_error", "rand", "randn", "random", "randstr", "rank", "reduce", "regexp",
    "regexp_count", "regexp_extract", "regexp_extract_all", "regexp_instr", "regexp_like",
    "regexp_replace", "regexp_substr", "regr_avgx", "regr_avgy", "regr_count", "regr_intercept",
    "regr_r2", "regr_slope", "regr_sxx", "regr_sxy", "regr_syy", "repeat", "replace", "reverse",
    "right", "rint", "rlike", "round", "row_number", "rpad", "rtrim", "schema_of_csv",
    "schema_of_json", "schema_of_variant", "schema_of_variant_agg", "sec", "second", "sentences",
    "sequence", "session_user", "session_window", "sha", "sha1", "sha2", "shiftleft",
    "shiftright", "shiftrightunsigned", "shuffle", "sign", "signum", "sin", "sinh", "size",
    "skewness", "slice", "smallint", "some", "sort_array", "soundex", "space",
    "spark_partition_id", "split", "split_part", "sqrt", "stack", "startswith", "std", "stddev",
    "stddev_pop", "stddev_samp", "str_to_map", "string", "string_agg", "struct", "substr",
    "substring", "substring_index", "sum", "tan", "tanh", "timestamp", "timestamp_micros",
    "timestamp_millis", "timestamp_seconds", "tinyint", "to_binary", "to_char", "to_csv",
    "to_date", "to_json", "to_number", "to_timestamp", "to_timestamp_ltz", "to_timestamp_ntz",
    "to_unix_timestamp", "to_utc_timestamp", "to_varchar", "to_variant_object", "transform",
    "transform_keys", "transform_values", "translate", "trim", "trunc", "try_add",
    "try_aes_decrypt", "try_avg", "try_divide", "try_element_at", "try_make_interval",
    "try_make_timestamp", "try_make_timestamp_ltz", "try_make_timestamp_ntz", "try_mod",
    "try_multiply", "try_parse_json", "try_parse_url", "try_subtract", "try_sum",
    "try_to_binary", "try_to_number", "try_to_timestamp", "try_url_decode", "try_validate_utf8",
    "try_variant_get", "typeof", "ucase", "unbase64", "unhex", "uniform", "unix_date",
    "unix_micros", "unix_millis", "unix_seconds", "unix_timestamp", "upper", "url_decode",
    "url_encode", "user", "uuid", "validate_utf8", "var_pop", "var_samp", "variance",
    "variant_get", "version", "weekday", "weekofyear", "when", "width_bucket", "window",
    "window_time", "xxhash64", "year", "zeroifnull", "zip_with",
})
"""Built-in functions a view may call: pure string, math, date, aggregate, window,
collection, JSON, hashing and variant functions."""

REFUSED_FUNCTIONS = {
    "reflect": "reaches the JVM", "java_method": "reaches the JVM",
    "try_reflect": "reaches the JVM",
    "input_file_name": "names the job's input files",
    "input_file_block_start": "names the job's input files",
    "input_file_block_length": "names the job's input files",
    "from_protobuf": "reads a descriptor file", "to_protobuf": "reads a descriptor file",
    "from_avro": "reads the files and URLs its options name",
    "schema_of_avro": "reads the files and URLs its options name",
}
"""Registry functions left off FUNCTIONS that are worth a specific reason; any other name
off the list is refused as not on it."""

TABLE_FUNCTIONS = frozenset({
    "range", "explode", "explode_outer", "inline", "inline_outer", "posexplode",
    "posexplode_outer", "stack", "json_tuple", "variant_explode", "variant_explode_outer",
})
"""Table-valued functions that read nothing but their arguments."""

SCHEMA_ARGUMENTS = {"from_json": 1, "from_csv": 1, "variant_get": 2, "try_variant_get": 2}
"""Functions whose argument at this position Spark reads as a type while it analyses the
query (ExprUtils.evalTypeExpr in Spark 4.0: DDL, else JSON, where a type "udt" names a class
Spark loads and instantiates). It must be a string literal, judged before analysis. These
are the allowlisted callers of evalTypeExpr/evalSchemaExpr in Spark 4.0.0 (JsonToStructs,
CsvToStructs, VariantGetExpressionBuilderBase; the XML ones are off the allowlist), and the
job's tests build every other allowlisted function from strings naming a class: none
instantiates it."""

OPTIONS_ARGUMENTS = {
    "from_json": (2, "json"), "to_json": (1, "json"), "schema_of_json": (1, "json"),
    "from_csv": (2, "csv"), "to_csv": (1, "csv"), "schema_of_csv": (1, "csv"),
}
"""Functions whose argument at this position is an options map, read by JSONOptions or
CSVOptions: the allowlisted callers of ExprUtils.convertToMapData in Spark 4.0.0
(JsonToStructs, StructsToJson, SchemaOfJson, CsvToStructs, StructsToCsv, SchemaOfCsv). It must
be `map('key', 'value', ...)` of string literals, keys in OPTION_KEYS of that family."""

MOST_ARGUMENTS = {
    "from_json": 3, "from_csv": 3, "to_json": 2, "to_csv": 2, "schema_of_json": 2,
    "schema_of_csv": 2, "variant_get": 3, "try_variant_get": 3,
}
"""No more arguments than these: a position judged is a position Spark reads."""

OPTION_KEYS = {
    "json": frozenset({
        "allowbackslashescapinganycharacter", "allowcomments", "allownonnumericnumbers",
        "allownumericleadingzeros", "allowsinglequotes", "allowunquotedcontrolchars",
        "allowunquotedfieldnames", "columnnameofcorruptrecord", "dateformat",
        "dropfieldifallnull", "enabledatetimeparsingfallback", "ignorenullfields",
        "infertimestamp", "linesep", "locale", "mode", "multiline", "prefersdecimal", "pretty",
        "primitivesasstring", "samplingratio", "timestampformat", "timestampntzformat",
        "timezone", "writenonasciicharacterascodepoint",
    }),
    "csv": frozenset({
        "chartoescapequoteescaping", "columnnameofcorruptrecord", "comment", "dateformat",
        "delimiter", "emptyvalue", "enabledatetimeparsingfallback", "enforceschema", "escape",
        "escapequotes", "header", "ignoreleadingwhitespace", "ignoretrailingwhitespace",
        "inferschema", "linesep", "locale", "maxcharspercolumn", "maxcolumns", "mode",
        "multiline", "nanvalue", "negativeinf", "nullvalue", "positiveinf", "preferdate",
        "quote", "quoteall", "samplingratio", "sep", "timestampformat", "timestampntzformat",
        "timezone", "unescapedquotehandling",
    }),
}
"""Options (lower case: Spark reads them case-insensitively) that only shape how values are
parsed or written: formats, separators, modes, time zones and locales. Left off: what names
a class (`compression`/`codec`, which Spark 4.0's CompressionCodecs loads by name), a
charset (`encoding`, `charset`), buffers and parser limits, and whatever Spark adds later."""
