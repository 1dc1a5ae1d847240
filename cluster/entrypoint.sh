#!/usr/bin/env bash
# One `dvc repro` of the pipeline on a cluster, in the workspace on the shared volume: the
# KubeRay RayJob's entrypoint (`cluster/entrypoint.sh`, run on the head pod in the project
# folder) and what `ray exec` runs on the launcher's head. Its exit status is dvc repro's: a
# failed stage (the report's exit 3 when cells failed included) fails the Ray job.
#
# The code is the image's (the folder this script is in, cluster/..). Everything a run leaves
# is under $CBENCH_STORE, the shared volume: the cells (cells/), the drivers' claims (claims/),
# and the DVC workspace (workspace/: params.resolved.yaml, dvc.lock, .dvc/cache, data/,
# reports/, and mlruns.db when MLflow has no server), so the next run, on another cluster,
# skips what this one did. The image's code and pipeline definition replace the workspace's at
# each start; DVC hashes contents, so the same image reruns nothing. Arguments go to dvc repro.
set -euo pipefail

image=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
store=${CBENCH_STORE:?CBENCH_STORE is unset: set it on every pod and node to the shared volume (cluster/README.md)}
workspace=$store/workspace
export CBENCH_PROFILE=${CBENCH_PROFILE:-cluster/params.cluster.yaml}

if [[ -n ${CBENCH_IMAGE_TAG:-} ]]; then  # the tag the image was built under names this code
    python "$image/cluster/image_tag.py" --expect "$CBENCH_IMAGE_TAG"
fi

mkdir -p "$workspace/.dvc"
# One run at a time in the workspace (another RayJob on the same volume waits for none: it stops
# here, before replacing the code under a running driver). The lock is held until dvc exits.
exec 9>"$store/workspace.lock"
if ! flock -n 9; then
    echo "entrypoint: another run holds $store/workspace.lock; submit again when it has ended" >&2
    exit 75
fi
for dir in pipeline stages profiles cluster; do
    rm -rf "${workspace:?}/$dir"
    cp -R "$image/$dir" "$workspace/$dir"
done
for file in dvc.yaml params.yaml params.schema.json .dvcignore; do
    if [[ -e $image/$file ]]; then cp "$image/$file" "$workspace/$file"; fi
done
if [[ -d $image/.dvc/plots ]]; then cp -R "$image/.dvc/plots" "$workspace/.dvc/"; fi

cd "$workspace"
if [[ ! -f .dvc/config ]]; then  # the first run: a DVC project without git, cache in .dvc/cache
    printf '[core]\n    no_scm = True\n    analytics = false\n' > .dvc/config
fi
echo "entrypoint: dvc repro in $workspace (profile $CBENCH_PROFILE, store $store)"
exec dvc repro "$@"
