/** tap `before`: build the migrated template database once, before the test files run. */
import { ensureTemplate } from '../helpers/database.ts';

const name = await ensureTemplate();
process.stdout.write(`# template database: ${name}\n`);
