import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import * as dockerBuild from '@pulumi/docker-build';
import * as gcp from '@pulumi/gcp';
import * as pulumi from '@pulumi/pulumi';
import { DoclineComponent } from './component';

/**
 * What worker/Dockerfile copies into the image (keep in step with its COPY lines; infra/test/
 * image-tag.test.ts checks every COPY source is covered). The tag is a hash of exactly these files,
 * so a code change gives a new tag and a new revision, and no change gives the same tag and nothing
 * to roll out. The e-invoice validator's inputs are here too: its install script (the pinned
 * artefacts) and its runner, Validate.java, which `worker/src` covers.
 */
export const IMAGE_SOURCES = [
  'worker/Dockerfile',
  'package.json',
  'package-lock.json',
  'tsconfig.json',
  'worker/tsconfig.build.json',
  'worker/src',
  'scripts/install-en16931.sh',
] as const;

function filesUnder(root: string, path: string): string[] {
  const full = join(root, path);
  if (!statSync(full).isDirectory()) return [path];
  return readdirSync(full)
    .sort()
    .flatMap((entry) => filesUnder(root, relative(root, join(full, entry))));
}

/** A tag derived from the content of the image's sources (16 hex digits of a SHA-256). */
export function contentTag(root: string, sources: readonly string[] = IMAGE_SOURCES): string {
  const hash = createHash('sha256');
  for (const file of sources.flatMap((source) => filesUnder(root, source)).sort()) {
    // Names are part of the hash: a renamed file is a different image.
    hash
      .update(file.replaceAll('\\', '/'))
      .update('\0')
      .update(readFileSync(join(root, file)))
      .update('\0');
  }
  return hash.digest('hex').slice(0, 16);
}

/**
 * The build context and Dockerfile as the image's inputs: relative to the directory Pulumi runs the
 * program in, the project directory (Pulumi.yaml sits at the repository root). An absolute path
 * would differ between a laptop and CI and make every `up` from the other machine a rebuild and a
 * new revision with no code change.
 */
export const BUILD_CONTEXT = '.';
export const DOCKERFILE = 'worker/Dockerfile';

/** Arguments of {@link WorkerImage}. */
export interface WorkerImageArgs {
  /** `REGION-docker.pkg.dev/PROJECT/REPOSITORY`, from the stack's repository. */
  repositoryUrl: pulumi.Input<string>;
  /** The repository's region (`REGION-docker.pkg.dev` is the registry host). */
  region: pulumi.Input<string>;
  /** The repository root on this machine: read to compute the content tag, never passed as an input. */
  root: string;
}

/**
 * The worker image, built from worker/Dockerfile and pushed to the stack's own Artifact Registry
 * repository inside `pulumi up` (used when `docline:image` is unset). The registry login uses the
 * deploying identity's own access token, so nothing else has to be configured.
 *
 * `retainOnDelete`: docker-build deletes an image with the registry credentials saved at its last
 * build, an access token that expires within the hour, so a later `destroy` would fail on it and
 * leave the repository behind. The image lives in the stack's own repository, whose deletion
 * removes it anyway.
 */
export class WorkerImage extends DoclineComponent {
  /** `REPOSITORY/worker:TAG@sha256:DIGEST`: the exact image pushed, what Cloud Run runs. */
  readonly ref: pulumi.Output<string>;

  constructor(name: string, args: WorkerImageArgs, opts?: pulumi.ComponentResourceOptions) {
    super('docline:index:WorkerImage', name, opts);
    const tag = contentTag(args.root);
    const token = gcp.organizations.getClientConfigOutput(this.child).accessToken;
    const image = new dockerBuild.Image(
      `${name}-worker`,
      {
        context: { location: BUILD_CONTEXT },
        dockerfile: { location: DOCKERFILE },
        platforms: [dockerBuild.Platform.Linux_amd64],
        tags: [pulumi.interpolate`${args.repositoryUrl}/worker:${tag}`],
        push: true,
        // A preview does not build: it would take minutes and push nothing.
        buildOnPreview: false,
        registries: [
          {
            address: pulumi.interpolate`${args.region}-docker.pkg.dev`,
            username: 'oauth2accesstoken',
            password: pulumi.secret(token),
          },
        ],
      },
      { ...this.child, retainOnDelete: true },
    );
    this.ref = image.ref;
    this.registerOutputs({ ref: this.ref });
  }
}
