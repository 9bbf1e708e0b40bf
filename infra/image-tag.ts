/**
 * Prints the worker image's content tag: a hash of exactly the files worker/Dockerfile copies, their
 * names and bytes, never their mode bits or timestamps, so the same commit gives the same tag on any
 * machine. The deploy workflow tags the one image it builds per commit with it; a stack that builds
 * its own image (docline:image unset) tags it the same way.
 *
 *   node --import tsx infra/image-tag.ts
 */
import { join } from 'node:path';
import { contentTag } from './components/worker-image';

process.stdout.write(`${contentTag(join(__dirname, '..'))}\n`);
