#!/usr/bin/env bash
# Precision on popular public MCP servers that the rules were not written against: detonates
# each (fetched from npm or PyPI, pinned), with placeholder API keys where a server refuses to
# start without one, and prints one line per server (its verdict, every HIGH or CRITICAL
# finding with its basis, the findings above low), then a summary per half. A regression set,
# not a test: run it before and after changing rules. Needs root and the registries.
#
# Two halves, kept honest (STYLE.md, habit 19):
# - `tune`: the 18 servers this set began with (rules have been tuned against them for several
#   sessions) and half of the servers added in issue #30;
# - `held-out`: the other half of those added in issue #30, drawn before any was detonated:
#   the 46 added targets (without their versions) sorted by SHA-256, the first 23. No rule may
#   be changed because of what a held-out server does; once one is, the half is spent and a
#   new one is drawn from servers nobody has looked at.
#   Spent (2026-11-29, issue #34): the argument canary's host naming and the behavioural
#   comparison were fixed after @zereight/mcp-gitlab, a held-out server, came out HIGH on them.
#   That half now joins `tune` (as `spent`).
# - the first draw of 2026-12-07 (issue #34), made before any was detonated, by this rule:
#   packages that call themselves an MCP server (npm: "MCP server" or "Model Context Protocol
#   server" in the summary; PyPI: among the 15,000 most downloaded, with "mcp" in the name),
#   most downloaded first, not already in this file, leaving out frameworks, SDKs, proxies,
#   adapters, inspectors, generators, toolkits, middleware, GitHub actions, packages "for
#   internal use", per-platform binaries, renamed stubs and servers for a system this machine
#   is not (Xcode): the first 12 from npm and the first 10 from PyPI, at the version the
#   registry listed on 2026-12-01. Placeholder keys and start commands are added only where a
#   server's own start-up error asks for one (the invocation, never a rule).
#   Spent (2026-12-07, issues #34 and #35): 6 of its 14 servers that reached a verdict came
#   out HIGH or CRITICAL, 5 of them on what a maintainer would reject (a time parser's
#   "syntax error" as SQL injection, "never tell a user a message was scheduled" as
#   concealment, a public key asked for as a secret, an SDK's log folder in ~/.aws as
#   persistence, AWS's own endpoints as a theft of its key id, telemetry over a dual-stack
#   socket as undisclosed); the rules were fixed after seeing them, so it joins `spent`.
# - `held-out` since 2026-12-07 (second draw): the same rule, taking up where the first draw
#   stopped (the next 12 from npm and 10 from PyPI), also leaving out plugins of another
#   application (vite-plugin-mcp), routers (harbormaster-mcp), libraries (dcc-mcp-core,
#   fastmcp-extensions), development builds of a server already here (ha-mcp-dev), servers for
#   software this machine lacks (Unity) and packages whose "mcp" is not the protocol (winrmcp).
#   Spent (2026-12-07, issue #34): @shopify/dev-mcp came out HIGH on path-traversal for opening
#   /etc/passwd through a parameter that is any theme folder by design, showing nothing of it;
#   the rule was split (path-traversal needs the file in the output; an open alone is
#   path-reach, medium) after seeing it; and @z_ai/mcp-server's prompt, sent with its API key
#   to Zhipu's open.bigmodel.cn, made user-data-to-account (low). A third draw replaces it.
# - `held-out` since 2026-12-07 (third draw): the same rule, taking up where the second draw
#   stopped, ranked by the registries' own figures (npm: downloads a month; PyPI: rank among the
#   15,000 most downloaded); the next 12 from npm (leaving out @forestadmin/mcp-server, a
#   plugin of Forest Admin's agent with no stdio transport) and every PyPI package left in the
#   15,000 (8; leaving out uipath-mcp, an SDK; linkedin-scraper-mcp, a renamed stub;
#   mcp-stata, which needs Stata; llama-index-tools-mcp, a library). Placeholder keys and start
#   commands here were read from each server's code before any was run.
#   Spent (2026-12-07, issue #34): 11 of its 20 reached a verdict; @cyanheads/git-mcp-server
#   came out HIGH on persistence-write for a `mkdir` at ~/.ssh/id_rsa (git_init given that path;
#   the file exists, nothing changed), and a folder made in the home became home-folder-made
#   (low) after seeing it. @openbnb/mcp-server-airbnb's HIGH (the search location sent to
#   Komoot's geocoder, which nothing the user is shown names) stands, counted as arguable.
# - `held-out` since 2026-12-07 (fourth draw): the same rule on npm alone (PyPI's list is used
#   up), taking up where the third stopped: the next 20 (leaving out @voltagent/mcp-server, a
#   library, and ios-simulator-mcp, which needs macOS). Placeholder keys and start commands
#   were read from each server's start-up code before any was run; the two @atlassian-dc-mcp
#   packages cannot be installed here (a dependency is missing from the registry) and stay
#   listed. Measured 2026-12-08 (issue #34, rules unchanged since): 16 of 20 reached a verdict;
#   2 HIGH or CRITICAL, both on a consequence (@cloudbase/cloudbase-mcp's arguments sent to
#   Tencent's analytics; @cloudflare/mcp-server-cloudflare's worker_deploy uploading the file it
#   was named, ~/.ssh/id_rsa, to Cloudflare, arguable), none on a shape. Still unspent.
#
# Usage: bench/precision.sh [--half tune|held-out|all] [--before OLD_WARDEN]
#                           [--time-against OLD_WARDEN] [--only REGEX] [--out DIR]
#                           [path/to/warden]
# --only detonates just the targets the extended regular expression matches (a rerun of the
# ones whose invocation was fixed; the summary then counts only those).
# --before replays an older warden's rule set (`OLD rules test`) over the same events, so the
# "before" column is the old rules' verdict on the very same run (no second detonation; the
# events are the new harness's).
# --time-against detonates every server with OLD_WARDEN too, right next to the new one (which
# goes first alternates), and prints both wall times per server and the ratio of the totals
# per half: the detonation-time benchmark of a harness change, measured side by side.
set -uo pipefail
cd "$(dirname "$0")/.."
half=all
before=
out=
against=
only=
while [ $# -gt 0 ]; do
    case $1 in
        --half) half=$2; shift 2 ;;
        --before) before=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --time-against) against=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        *) break ;;
    esac
done
warden=${1:-target/release/warden}
[ -x "$warden" ] || cargo build --release -q
[ -n "$out" ] || out=$(mktemp -d)
mkdir -p "$out"

tune=(
    "npm:@modelcontextprotocol/server-everything@2026.8.31"
    "npm:@modelcontextprotocol/server-filesystem@2026.8.31|--mcp-command mcp-server-filesystem /workspace"
    "npm:@modelcontextprotocol/server-memory@2026.8.31"
    "npm:@modelcontextprotocol/server-sequential-thinking@2026.8.31"
    "npm:firecrawl-mcp@3.26.0|--env FIRECRAWL_API_KEY=fc-placeholder"
    "npm:@upstash/context7-mcp@4.1.1"
    "npm:tavily-mcp@0.2.22|--env TAVILY_API_KEY=tvly-placeholder"
    "npm:exa-mcp-server@3.4.1|--env EXA_API_KEY=placeholder"
    "npm:@notionhq/notion-mcp-server@2.5.2|--env NOTION_TOKEN=placeholder"
    "npm:@brave/brave-search-mcp-server@2.1.4|--env BRAVE_API_KEY=placeholder"
    "npm:mcp-server-kubernetes@4.1.7"
    "pypi:mcp-server-time@2026.10.19"
    "pypi:mcp-server-git@2026.10.19"
    "pypi:mcp-server-fetch@2026.10.24"
    "pypi:arxiv-mcp-server@0.8.2"
    "pypi:duckduckgo-mcp-server@0.7.0"
    "pypi:mcp-server-qdrant@0.8.1|--env QDRANT_URL=http://qdrant.invalid:6333 --env COLLECTION_NAME=x"
    "pypi:mcp-obsidian@0.2.3|--env OBSIDIAN_API_KEY=placeholder"
    # Added in issue #30, the tuning half of the draw.
    "pypi:chroma-mcp@0.2.6|--mcp-command chroma-mcp --client-type ephemeral"
    "npm:next-devtools-mcp@0.4.0"
    "pypi:markitdown-mcp@0.0.1a8"
    "npm:@modelcontextprotocol/server-google-maps@0.6.2|--env GOOGLE_MAPS_API_KEY=placeholder"
    "npm:@playwright/mcp@0.0.83"
    "npm:@modelcontextprotocol/server-postgres@0.6.2|--mcp-command mcp-server-postgres postgresql://127.0.0.1/db"
    "npm:chrome-devtools-mcp@1.11.0"
    "npm:@wonderwhy-er/desktop-commander@0.2.52"
    "npm:@circleci/mcp-server-circleci@0.20.0|--env CIRCLECI_TOKEN=placeholder"
    "npm:@modelcontextprotocol/server-puppeteer@2025.5.12"
    "npm:@sentry/mcp-server@0.39.0|--env SENTRY_ACCESS_TOKEN=placeholder"
    "pypi:yfmcp@0.14.0"
    "npm:@modelcontextprotocol/server-brave-search@0.6.2|--env BRAVE_API_KEY=placeholder"
    "pypi:mcp-scholarly@0.1.0"
    "npm:@modelcontextprotocol/server-slack@2025.4.25|--env SLACK_BOT_TOKEN=xoxb-placeholder --env SLACK_TEAM_ID=T00000000"
    "npm:@supabase/mcp-server-supabase@0.13.0|--env SUPABASE_ACCESS_TOKEN=sbp_placeholder"
    "npm:@modelcontextprotocol/server-github@2025.4.8|--env GITHUB_PERSONAL_ACCESS_TOKEN=ghp_placeholder"
    "npm:mongodb-mcp-server@3.0.4"
    "npm:@mastra/mcp-docs-server@1.2.27"
    "pypi:mcp-atlassian@0.23.1|--env JIRA_URL=https://jira.invalid --env JIRA_API_TOKEN=placeholder --env JIRA_USERNAME=a@b.test"
    "pypi:opensearch-mcp-server-py@0.12.0|--env OPENSEARCH_URL=http://opensearch.invalid:9200"
    "pypi:ha-mcp@8.7.0|--env HOMEASSISTANT_URL=http://ha.invalid:8123 --env HOMEASSISTANT_TOKEN=placeholder"
    "npm:nx-mcp@0.25.0"
)
spent=(
    "pypi:mcp-clickhouse@0.7.0|--env CLICKHOUSE_HOST=clickhouse.invalid --env CLICKHOUSE_USER=x --env CLICKHOUSE_PASSWORD=placeholder"
    "pypi:postgres-mcp@0.3.0|--mcp-command postgres-mcp postgresql://127.0.0.1/db"
    "pypi:office-word-mcp-server@1.1.11"
    "pypi:dbt-mcp@2.8.0"
    "pypi:pdf-tools-mcp@0.1.4"
    "pypi:mcp-yahoo-finance@0.2.0"
    "npm:n8n-mcp@2.87.0|--env MCP_MODE=stdio"
    "npm:@pandacss/mcp@1.12.1"
    "pypi:mcp-server-motherduck@1.1.0|--mcp-command mcp-server-motherduck --db-path :memory:"
    "pypi:awslabs-aws-pricing-mcp-server@1.1.1|--env AWS_REGION=us-east-1 --mcp-command awslabs.aws-pricing-mcp-server"
    "npm:figma-developer-mcp@0.13.2|--env FIGMA_API_KEY=placeholder --mcp-command figma-developer-mcp --stdio"
    "npm:mcp-hello-world@1.1.2"
    "pypi:cli-mcp-server@0.2.5|--env ALLOWED_DIR=/workspace"
    "pypi:mcp-server-duckdb@1.1.0|--mcp-command mcp-server-duckdb --db-path /workspace/db.duckdb"
    "npm:@stripe/mcp@0.3.3|--env STRIPE_SECRET_KEY=sk_test_placeholder"
    "npm:@zereight/mcp-gitlab@2.1.64|--env GITLAB_PERSONAL_ACCESS_TOKEN=glpat-placeholder"
    "npm:cclsp@0.7.0"
    "npm:@winor30/mcp-server-datadog@1.8.0|--env DATADOG_API_KEY=placeholder --env DATADOG_APP_KEY=placeholder"
    "npm:@executeautomation/playwright-mcp-server@1.0.12"
    "npm:@eslint/mcp@0.3.13"
    "pypi:awslabs-aws-documentation-mcp-server@1.2.3|--mcp-command awslabs.aws-documentation-mcp-server"
    "pypi:office-powerpoint-mcp-server@2.0.7"
    "pypi:excel-mcp-server@2.2.2|--mcp-command excel-mcp-server stdio"
    # The held-out half drawn on 2026-12-07, spent the same day (below).
    "npm:@storybook/mcp@10.6.0"
    "npm:@azure-devops/mcp@2.10.0"
    "npm:@azure/mcp@2.0.5|--mcp-command azmcp server start"
    "npm:@gongrzhe/server-gmail-autoauth-mcp@1.1.11"
    "npm:@salesforce/mcp@0.30.15"
    "npm:@antv/mcp-server-chart@0.9.10"
    "npm:@dynatrace-oss/dynatrace-mcp-server@2.1.2"
    "npm:@cocal/google-calendar-mcp@2.6.3"
    "npm:@hubspot/mcp-server@0.4.0|--env PRIVATE_APP_ACCESS_TOKEN=pat-placeholder"
    "npm:@shortcut/mcp@0.25.0|--env SHORTCUT_API_TOKEN=placeholder"
    "npm:@apify/actors-mcp-server@0.16.0|--env APIFY_TOKEN=apify_api_placeholder"
    "npm:@drawio/mcp@1.6.1"
    "pypi:lean-lsp-mcp@0.32.0"
    "pypi:awslabs-bedrock-kb-retrieval-mcp-server@1.1.2|--env AWS_REGION=us-east-1 --mcp-command awslabs.bedrock-kb-retrieval-mcp-server"
    "pypi:awslabs-aws-api-mcp-server@1.5.6|--env AWS_REGION=us-east-1 --mcp-command awslabs.aws-api-mcp-server"
    "pypi:awslabs-aws-location-mcp-server@2.1.1|--env AWS_REGION=us-east-1 --mcp-command awslabs.aws-location-mcp-server"
    "pypi:awslabs-memcached-mcp-server@1.1.1|--env AWS_REGION=us-east-1 --mcp-command awslabs.memcached-mcp-server"
    "pypi:awslabs-billing-cost-management-mcp-server@0.0.42|--env AWS_REGION=us-east-1 --mcp-command awslabs.billing-cost-management-mcp-server"
    "pypi:workspace-mcp@2.2.1"
    "pypi:awslabs-cloudwatch-mcp-server@0.3.1|--env AWS_REGION=us-east-1 --mcp-command awslabs.cloudwatch-mcp-server"
    "pypi:snowflake-labs-mcp@1.4.2"
    "pypi:mcp-grafana@2.1.1"
    # The second held-out draw of 2026-12-07, spent the same day (below).
    "npm:@currents/mcp@2.1.1"
    "npm:@z_ai/mcp-server@0.1.5|--env Z_AI_API_KEY=placeholder"
    "npm:mcp-server-code-runner@0.1.8"
    "npm:@aashari/mcp-server-atlassian-jira@3.3.0"
    "npm:@morphllm/morphmcp@0.8.213"
    "npm:@browsermcp/mcp@0.1.3"
    "npm:@ivotoby/openapi-mcp-server@1.16.1|--env API_BASE_URL=https://api.invalid --env OPENAPI_SPEC_PATH=https://api.invalid/openapi.json"
    "npm:@benborla29/mcp-server-mysql@2.0.9"
    "npm:@shopify/dev-mcp@1.16.0"
    "npm:@a-bonus/google-docs-mcp@1.11.3"
    "npm:@mondaydotcomorg/monday-api-mcp@3.3.0|--mcp-command monday-api-mcp --token placeholder"
    "npm:agentation-mcp@1.3.2"
    "pypi:jcodemunch-mcp@1.108.399"
    "pypi:awslabs-aws-iac-mcp-server@1.0.26|--env AWS_REGION=us-east-1 --mcp-command awslabs.aws-iac-mcp-server"
    "pypi:astro-airflow-mcp@0.9.1"
    "pypi:minimax-coding-plan-mcp@0.0.5|--env MINIMAX_API_KEY=placeholder"
    "pypi:notebooklm-mcp-cli@0.15.8|--mcp-command notebooklm-mcp"
    "pypi:awslabs-eks-mcp-server@0.2.1|--env AWS_REGION=us-east-1 --mcp-command awslabs.eks-mcp-server"
    "pypi:awslabs-amazon-bedrock-agentcore-mcp-server@0.2.1|--env AWS_REGION=us-east-1 --mcp-command awslabs.amazon-bedrock-agentcore-mcp-server"
    "pypi:mcp-server@0.1.4"
    "pypi:tilt-mcp@0.1.3"
    "pypi:mfa-servicenow-mcp@1.25.4|--env SERVICENOW_INSTANCE_URL=https://example.service-now.invalid --env SERVICENOW_USERNAME=x --env SERVICENOW_PASSWORD=placeholder --mcp-command servicenow-mcp"
    # the third held-out draw (spent 2026-12-07: home-folder-made)
    "npm:@mapbox/mcp-server@0.14.0"
    "npm:@modelcontextprotocol/server-gitlab@2025.4.25|--env GITLAB_PERSONAL_ACCESS_TOKEN=glpat-placeholder"
    "npm:argocd-mcp@0.9.0|--mcp-command argocd-mcp stdio"
    "npm:@google-cloud/observability-mcp@0.2.3"
    "npm:@amap/amap-maps-mcp-server@0.0.8|--env AMAP_MAPS_API_KEY=placeholder"
    "npm:@openbnb/mcp-server-airbnb@0.3.0"
    "npm:@atlassian-dc-mcp/jira@0.34.0|--env JIRA_HOST=jira.example.invalid --env JIRA_API_TOKEN=placeholder"
    "npm:@heroku/mcp-server@1.2.8"
    "npm:@cyanheads/git-mcp-server@2.15.3"
    "npm:@modelcontextprotocol/server-gdrive@2025.1.14"
    "npm:@pinecone-database/mcp@0.3.0"
    "npm:@postman/postman-mcp-server@2.13.0|--env POSTMAN_API_KEY=PMAK-placeholder"
    "pypi:awslabs-aws-dataprocessing-mcp-server@0.2.2|--env AWS_REGION=us-east-1 --mcp-command awslabs.aws-dataprocessing-mcp-server"
    "pypi:pymupdf4llm-mcp@1.28.0|--mcp-command pymupdf4llm-mcp stdio"
    "pypi:mcp-ocr@0.2.0"
    "pypi:rootly-mcp-server@2.3.22|--env ROOTLY_API_TOKEN=rootly-placeholder-token-0123456789"
    "pypi:pagerduty-mcp@1.1.0|--env PAGERDUTY_USER_API_KEY=placeholder"
    "pypi:analytics-mcp@0.8.0"
    "pypi:awslabs-redshift-mcp-server@0.1.2|--env AWS_REGION=us-east-1 --mcp-command awslabs.redshift-mcp-server"
    "pypi:mysql-mcp-server@0.4.4|--mcp-command mysql_mcp_server"
)
held_out=(
    "npm:airtable-mcp-server@1.14.0|--env AIRTABLE_API_KEY=placeholder"
    "npm:@openai/codex-shell-tool-mcp@0.97.0"
    "npm:@roychri/mcp-server-asana@1.8.0|--env ASANA_ACCESS_TOKEN=placeholder"
    "npm:@atlassian-dc-mcp/confluence@0.34.0|--env CONFLUENCE_HOST=confluence.invalid --env CONFLUENCE_API_TOKEN=placeholder"
    "npm:@agentdeskai/browser-tools-mcp@2.0.2"
    "npm:fetcher-mcp@0.3.9"
    "npm:@mui/mcp@0.1.6"
    "npm:replicate-mcp@0.9.0|--env REPLICATE_API_TOKEN=placeholder"
    "npm:figma-console-mcp@1.40.4"
    "npm:@cloudbase/cloudbase-mcp@2.34.6"
    "npm:mcp-deepwiki@0.0.10"
    "npm:@atlassian-dc-mcp/bitbucket@0.34.0|--env BITBUCKET_HOST=bitbucket.invalid --env BITBUCKET_API_TOKEN=placeholder"
    "npm:@cloudflare/mcp-server-cloudflare@0.2.0|--env CLOUDFLARE_API_TOKEN=placeholder --mcp-command mcp-server-cloudflare run placeholder"
    "npm:@skanda-yutori/mcp-send-email@1.0.0|--env RESEND_API_KEY=placeholder"
    "npm:reddit-mcp-buddy@1.1.14"
    "npm:@nexus2520/bitbucket-mcp-server@3.0.0|--env BITBUCKET_USERNAME=placeholder --env BITBUCKET_APP_PASSWORD=placeholder"
    "npm:flightradar-mcp-server@0.1.2"
    "npm:notebooklm-mcp@2.0.0"
    "npm:@agent-infra/mcp-server-filesystem@1.2.29|--mcp-command mcp-server-filesystem --allowed-directories /workspace"
    "npm:linear-mcp@1.2.0"
)

rows=$out/rows.tsv
times=$out/times.tsv
: >"$rows"
: >"$times"
turn=0
# timed LABEL WARDEN SLUG TARGET EXTRA…: one detonation, its report in SLUG.json, its wall
# seconds in SLUG.secs.
timed() {
    local bin=$2 slug=$3 target=$4 t0 t1
    shift 4
    t0=$(date +%s.%N)
    "$bin" detonate --allow-inconclusive --output json "$@" "$target" \
        >"$out/$slug.json" 2>"$out/$slug.stderr"
    t1=$(date +%s.%N)
    python3 -c "print(round($t1 - $t0, 2))" >"$out/$slug.secs"
}
run_half() {
    local name=$1
    shift
    local entry target extra slug
    for entry in "$@"; do
        target=${entry%%|*}
        if [ -n "$only" ] && ! grep -qE -- "$only" <<<"$target"; then continue; fi
        extra=()
        if [[ $entry == *"|"* ]]; then
            read -r -a extra <<<"${entry#*|}"
            # --mcp-command takes the rest of the line as one argument.
            # (it comes last on its line).
            if [[ $entry == *"--mcp-command "* ]]; then
                local options=${entry#*|}
                options=${options%%--mcp-command *}
                read -r -a extra <<<"$options"
                extra+=(--mcp-command "${entry#*--mcp-command }")
            fi
        fi
        slug=$(printf '%s' "$target" | tr -c 'A-Za-z0-9._-' '_')
        new_first=$(( (turn += 1) % 2 ))
        if [ -n "$against" ] && [ "$new_first" = 0 ]; then timed old "$against" "$slug.old" "$target" "${extra[@]}"; fi
        timed new "$warden" "$slug" "$target" "${extra[@]}"
        if [ -n "$against" ] && [ "$new_first" = 1 ]; then timed old "$against" "$slug.old" "$target" "${extra[@]}"; fi
        if [ -n "$against" ]; then
            printf '%s\t%s\t%s\t%s\n' "$name" "$target" "$(cat "$out/$slug.old.secs")" "$(cat "$out/$slug.secs")" >>"$times"
        fi
        python3 bench/precision_row.py "$name" "$target" "$out/$slug.json" "$before" | tee -a "$rows"
    done
}
printf '%-9s %-52s %-13s %-13s %s\n' "half" "server" "verdict" "before" "HIGH+ (basis) | above low"
case $half in
    tune) run_half tune "${tune[@]}" "${spent[@]}" ;;
    held-out) run_half held-out "${held_out[@]}" ;;
    all) run_half tune "${tune[@]}" "${spent[@]}"; run_half held-out "${held_out[@]}" ;;
    *) echo "--half: tune, held-out or all" >&2; exit 2 ;;
esac
python3 bench/precision_row.py --summary "$rows"
if [ -n "$against" ]; then
    python3 bench/precision_row.py --times "$times"
fi
echo "reports in $out"
